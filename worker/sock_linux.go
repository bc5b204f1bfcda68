package worker

import (
	"net"

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
