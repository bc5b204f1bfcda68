//go:build race

package io

import (
	"runtime"
	"unsafe"
)

const raceEnabled = true

func raceReadRange(p unsafe.Pointer, n int)  { runtime.RaceReadRange(p, n) }
func raceWriteRange(p unsafe.Pointer, n int) { runtime.RaceWriteRange(p, n) }
