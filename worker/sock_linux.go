package worker

import (
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

func unixGetsockname(fd int) (*net.TCPAddr, error) {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return nil, err
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]).To16(), Port: a.Port}, nil
	case *unix.SockaddrInet6:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}, nil
	}
	return nil, unix.EAFNOSUPPORT
}

func closeFD(fd int) { _ = unix.Close(fd) }

// localIP is the local address of the socket fd (getsockname), the
// address a client dialled on a listener bound to every address. It does
// not allocate, as unix.Getsockname does, for it runs on the loop for a
// request ($server_addr).
func localIP(fd int) (netip.Addr, bool) {
	var rsa unix.RawSockaddrAny
	n := uint32(unix.SizeofSockaddrAny)
	_, _, e := unix.RawSyscall(unix.SYS_GETSOCKNAME, uintptr(fd), uintptr(unsafe.Pointer(&rsa)), uintptr(unsafe.Pointer(&n)))
	if e != 0 {
		return netip.Addr{}, false
	}
	switch rsa.Addr.Family {
	case unix.AF_INET:
		a := (*unix.RawSockaddrInet4)(unsafe.Pointer(&rsa))
		return netip.AddrFrom4(a.Addr), true
	case unix.AF_INET6:
		a := (*unix.RawSockaddrInet6)(unsafe.Pointer(&rsa))
		return netip.AddrFrom16(a.Addr).Unmap(), true
	}
	return netip.Addr{}, false
}
