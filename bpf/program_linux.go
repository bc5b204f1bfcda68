package bpf

import (
	"fmt"

	"github.com/cilium/ebpf/asm"
)

// Offsets into struct sk_reuseport_md (include/uapi/linux/bpf.h):
//
//	data          0  (__bpf_md_ptr: 8 bytes on every architecture)
//	data_end      8
//	len          16  u32
//	eth_protocol 20  u32
//	ip_protocol  24  u32
//	bind_inany   28  u32
//	hash         32  u32
//	(4 bytes of padding)
//	sk           40  __bpf_md_ptr, since 5.14
//	migrating_sk 48  __bpf_md_ptr, since 5.14
//
// TestContextLayout checks them against the running kernel's BTF.
const (
	offMDHash        = 32
	offMDMigratingSK = 48
)

const (
	skPass = 1 // SK_PASS
	skDrop = 0 // SK_DROP (a refusal): only with no live slot (the gateway stopping)

	// loadStride is the value size of the load-count array: one cache line per
	// worker, so that two workers' counters never share a line. The count is
	// the first 8 bytes.
	loadStride = 64

	// maxProbes bounds how many further slots the program tries, in order,
	// after the chosen slot turned out empty (a worker that left or died).
	maxProbes = 16

	// noSlot marks a CPU that maps to no slot in the cpu map.
	noSlot = ^uint32(0)
)

// Stack slots of the program, relative to the frame pointer.
const (
	stackSelectKey = -4  // key passed to bpf_sk_select_reuseport
	stackLookupKey = -8  // key passed to bpf_map_lookup_elem
	stackSecond    = -12 // ModeLeastConn: the second candidate
)

// objectFDs are the file descriptors the program refers to.
type objectFDs struct {
	sockarray, config, cpumap, loads int
}

// programInsns assembles the sk_reuseport program for mode. It returns SK_PASS
// when live slots exist; when no slot could be selected among them the kernel
// falls back to its own hash over the group's live sockets, which is also
// what migrates a closing listener's queue when every probed slot is empty.
// With no live slot (SetLive(0): the gateway stopping) it refuses new
// connections.
//
// Registers: R6 ctx, R7 live slots, R8 chosen slot, R9 scratch (R6–R9 survive
// helper calls).
//
// migrateField: the program is attached as SELECT_OR_MIGRATE and may read
// the context's migrating_sk (linux 5.14).
func programInsns(mode Mode, slots int, fd objectFDs, migrateField bool) asm.Instructions {
	insns := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		// live := config[0]; live == 0 → no selection.
		asm.StoreImm(asm.RFP, stackLookupKey, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, fd.config),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, stackLookupKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "pass"),
		asm.LoadMem(asm.R7, asm.R0, 0, asm.Word),
		asm.JEq.Imm(asm.R7, 0, "nolive"),
		// slot := ctx->hash % live
		asm.LoadMem(asm.R8, asm.R6, offMDHash, asm.Word),
		asm.Mod.Reg(asm.R8, asm.R7),
	}
	switch mode {
	case ModeCPU:
		insns = append(insns,
			// s := cpumap[smp_processor_id()]; s < live → slot = s
			asm.FnGetSmpProcessorId.Call(),
			asm.StoreMem(asm.RFP, stackLookupKey, asm.R0, asm.Word),
			asm.LoadMapPtr(asm.R1, fd.cpumap),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, stackLookupKey),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "select"),
			asm.LoadMem(asm.R9, asm.R0, 0, asm.Word),
			asm.JGE.Reg(asm.R9, asm.R7, "select"),
			asm.Mov.Reg(asm.R8, asm.R9),
		)
	case ModeLeastConn:
		insns = append(insns,
			asm.JLT.Imm(asm.R7, 2, "select"),
			// second := (slot + 1 + prandom % (live-1)) % live, never == slot
			asm.FnGetPrandomU32.Call(),
			asm.Mov.Reg(asm.R9, asm.R7),
			asm.Sub.Imm(asm.R9, 1),
			asm.Mod.Reg(asm.R0, asm.R9),
			asm.Add.Imm(asm.R0, 1),
			asm.Add.Reg(asm.R0, asm.R8),
			asm.Mod.Reg(asm.R0, asm.R7),
			asm.StoreMem(asm.RFP, stackSecond, asm.R0, asm.Word),
			// R9 := loads[slot]
			asm.StoreMem(asm.RFP, stackLookupKey, asm.R8, asm.Word),
			asm.LoadMapPtr(asm.R1, fd.loads),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, stackLookupKey),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "select"),
			asm.LoadMem(asm.R9, asm.R0, 0, asm.DWord),
			// R0 := loads[second]; pick second only when strictly lower.
			asm.LoadMapPtr(asm.R1, fd.loads),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, stackSecond),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "select"),
			asm.LoadMem(asm.R0, asm.R0, 0, asm.DWord),
			asm.JSGE.Reg(asm.R0, asm.R9, "select"),
			asm.LoadMem(asm.R8, asm.RFP, stackSecond, asm.Word),
		)
	}
	selectSlot := func(label string) asm.Instructions {
		return asm.Instructions{
			asm.StoreMem(asm.RFP, stackSelectKey, asm.R8, asm.Word).WithSymbol(label),
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.LoadMapPtr(asm.R2, fd.sockarray),
			asm.Mov.Reg(asm.R3, asm.RFP),
			asm.Add.Imm(asm.R3, stackSelectKey),
			asm.Mov.Imm(asm.R4, 0),
			asm.FnSkSelectReuseport.Call(),
			asm.JEq.Imm(asm.R0, 0, "pass"),
		}
	}
	insns = append(insns, selectSlot("select")...)
	// The chosen slot is empty: try the next ones, wrapping at live.
	for i := 1; i <= min(slots-1, maxProbes); i++ {
		label := fmt.Sprintf("probe%d", i)
		insns = append(insns,
			asm.JLE.Imm(asm.R7, int32(i), "pass"),
			asm.Add.Imm(asm.R8, 1),
			asm.JLT.Reg(asm.R8, asm.R7, label),
			asm.Mov.Imm(asm.R8, 0),
		)
		insns = append(insns, selectSlot(label)...)
	}
	insns = append(insns,
		asm.Mov.Imm(asm.R0, skPass).WithSymbol("pass"),
		asm.Return(),
	)
	// No live slot: the gateway is stopping. A new connection is refused
	// (SK_DROP on a SYN: the kernel answers RST, as with no listener),
	// rather than queued to a listener about to close and reset then; one
	// migrating from a closing listener is left to the kernel.
	if migrateField {
		return append(insns,
			asm.LoadMem(asm.R1, asm.R6, offMDMigratingSK, asm.DWord).WithSymbol("nolive"),
			asm.JNE.Imm(asm.R1, 0, "pass"),
			asm.Mov.Imm(asm.R0, skDrop),
			asm.Return(),
		)
	}
	return append(insns,
		asm.Mov.Imm(asm.R0, skDrop).WithSymbol("nolive"),
		asm.Return(),
	)
}
