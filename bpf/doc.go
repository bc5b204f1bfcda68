// Package bpf steers each new TCP connection of a SO_REUSEPORT group to one
// worker process, and keeps a closing worker's queued connections alive by
// moving them to a live worker.
//
// # Pieces
//
// The supervisor creates one Selector (it needs CAP_BPF): a
// BPF_MAP_TYPE_REUSEPORT_SOCKARRAY indexed by worker slot, an sk_reuseport
// program assembled with cilium/ebpf's asm package (no C compiler involved),
// an mmapable array where each worker publishes its active-connection count,
// a one-entry array holding the number of live slots, and a cpu → slot array.
// It passes Selector.Files to every worker through exec.Cmd.ExtraFiles, in
// the order of the File* constants:
//
//	ExtraFiles[k+0] FileSockArray  reuseport sockarray (the worker puts its listener in it)
//	ExtraFiles[k+1] FileProgram    sk_reuseport program (the worker attaches it to the group)
//	ExtraFiles[k+2] FileLoads      mmapable count array (the worker mmaps its slot's counter)
//	ExtraFiles[k+3] FileConfig     live-slot count (supervisor only)
//	ExtraFiles[k+4] FileCPUMap     cpu → slot (supervisor only)
//
// A worker, which needs no capability, opens them with
// OpenMember(InheritedFiles(3+k), slot), creates its own listening socket on
// the shared port with SO_REUSEPORT, and calls Member.Join with it. It calls
// Member.AddConns(+1/-1) as connections open and close (an atomic add on
// shared memory). To drain, it calls Member.Leave (new connections go to the
// other slots), stops accepting, and closes its listener: connections still in
// its accept queue, and half-open ones, migrate to a live listener instead of
// being reset. A worker killed with SIGKILL gets the same treatment, since
// the kernel closes its listener.
//
// A worker that stops answering (SIGSTOP, a stuck process) still holds its
// listener, so the program would keep steering connections into a queue
// nobody accepts from. The supervisor takes it out with Selector.Remove,
// which empties the slot as Leave does while the socket stays open (what
// its queue holds waits there: a socket that is not closed cannot migrate
// it); the worker, once it runs again, puts the same socket back with
// Member.Rejoin, which never displaces a successor's socket.
//
// All listeners of a reuseport group must belong to the same user, and the
// supervisor should hold no listener in the group. The objects live as long
// as any process holds one of their descriptors or a listener of the group has
// the program attached.
//
// # Program
//
// The program reads, from struct sk_reuseport_md, hash (offset 32) and
// nothing else; live = config[0]. When live is 0 it selects nothing. Otherwise:
//
//   - ModeHash: slot = hash % live.
//   - ModeCPU: slot = cpumap[bpf_get_smp_processor_id()] when that is < live,
//     else hash % live. On a NIC the SYN's CPU is the one RSS/RPS chose; on
//     loopback it is the CPU of the thread that called connect().
//   - ModeLeastConn: a = hash % live, b = (a + 1 + prandom % (live-1)) % live;
//     slot = b when count[b] < count[a], else a.
//
// It then calls bpf_sk_select_reuseport(ctx, sockarray, &slot, 0). When the
// slot is empty (a worker left or died) it tries the following slots, wrapping
// at live, up to 16 more; when none can be selected it returns SK_PASS
// without a selection and the kernel picks by its own hash among the group's
// live sockets. The program never drops. It is loaded with the attach type
// BPF_SK_REUSEPORT_SELECT_OR_MIGRATE, so the kernel also runs it, with
// migrating_sk set, for each queued or half-open connection of a closing
// listener; the closing listener's slot is already empty then, so the same
// logic picks a live one.
//
// # Fallbacks
//
// Probe reports the best Kind available, which the supervisor logs and
// exports as a metric; the gateway starts in every case:
//
//	KindEBPF        Selector + Member, all modes, migration by the program
//	KindCBPF        AttachCBPF: cpu mode by SKF_AD_CPU, otherwise the kernel hash;
//	                migration only with EnableMigrateSysctl
//	KindKernelHash  no program; EnableMigrateSysctl makes the queue migrate by hash
//	KindPlain       plain SO_REUSEPORT; a closing listener's queue is reset
//
// # Kernel features and probes
//
// Like cilium's features package, each probe returns nil (supported), an
// error wrapping ErrNotSupported (the kernel or process lacks it), or another
// error (inconclusive).
//
//	feature                                   linux  probe
//	SO_REUSEPORT for TCP                       3.9   always assumed
//	SO_ATTACH_REUSEPORT_CBPF                   4.5   attach "ret #0" to a scratch socket (probeCBPF)
//	BPF_PROG_TYPE_SK_REUSEPORT                 4.19  features.HaveProgramType(ebpf.SkReuseport)
//	BPF_MAP_TYPE_REUSEPORT_SOCKARRAY           4.19  features.HaveMapType(ebpf.ReusePortSockArray)
//	BPF_F_MMAPABLE array                       5.5   features.HaveMapFlag(features.BPF_F_MMAPABLE)
//	BPF_SK_REUSEPORT_SELECT_OR_MIGRATE         5.14  loading the program with it (Selector.Migrates);
//	                                                 the SELECT attach type is used before 5.14
//	net.ipv4.tcp_migrate_req                   5.14  the sysctl file is writable (probeMigrateSysctl)
//	bpf() on inherited fds without CAP_BPF     5.19  none: before 5.19, kernel.unprivileged_bpf_disabled
//	                                                 refuses every bpf() command to a worker without CAP_BPF;
//	                                                 since, it refuses only map creation and program load
//
// Probe builds and discards a real Selector, so KindEBPF also means that the
// verifier accepts the program on this kernel.
//
// # Classic BPF drawback
//
// A classic reuseport program returns an index into the group's internal
// socket array, which follows listen() order, not worker ids; when a socket
// leaves, the last one takes its place. After a worker restart, CPU c may thus
// lead to another worker's socket, and CPUs beyond the group size fall back to
// the kernel hash.
//
// # Concurrency and lifetimes
//
// Selector and Member methods are safe for concurrent use except Close, which
// must not run concurrently with the others. Member.AddConns makes no system
// call and does not allocate, and must not be called after Member.Close. The
// files returned by Selector.Files belong to the Selector and stay valid until
// its Close.
package bpf
