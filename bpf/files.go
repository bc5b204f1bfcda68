package bpf

import "os"

// MaxSlots is the largest slot count a Selector accepts.
const MaxSlots = 4096

// Positions of the selector's objects in Selector.Files. A worker needs the
// first three (FileSockArray, FileProgram, FileLoads); the config and cpu maps
// are passed for completeness and inspection.
const (
	FileSockArray = iota // BPF_MAP_TYPE_REUSEPORT_SOCKARRAY, key u32 slot, value u64 socket fd
	FileProgram          // BPF_PROG_TYPE_SK_REUSEPORT program
	FileLoads            // BPF_MAP_TYPE_ARRAY, BPF_F_MMAPABLE, key u32 slot, value 64 bytes (s64 count first)
	FileConfig           // BPF_MAP_TYPE_ARRAY, 1 entry, value u32 live slots
	FileCPUMap           // BPF_MAP_TYPE_ARRAY, key u32 cpu, value u32 slot (0xffffffff: none)
	NumFiles
)

var fileNames = [NumFiles]string{
	FileSockArray: "coregate-bpf-sockarray",
	FileProgram:   "coregate-bpf-program",
	FileLoads:     "coregate-bpf-loads",
	FileConfig:    "coregate-bpf-config",
	FileCPUMap:    "coregate-bpf-cpumap",
}

// FileName is the name of the selector's object at position i of
// Selector.Files (the files' names, which InheritedFiles gives too).
func FileName(i int) string { return fileNames[i] }

// InheritedFiles returns NumFiles files for the descriptors first,
// first+1, … that a worker inherited from Selector.Files through
// exec.Cmd.ExtraFiles (ExtraFiles[i] becomes descriptor 3+i). The supervisor
// must pass all of Selector.Files, in order, or closing these files would
// close unrelated descriptors. Close them once OpenMember has returned.
func InheritedFiles(first int) []*os.File {
	files := make([]*os.File, NumFiles)
	for i := range files {
		files[i] = os.NewFile(uintptr(first+i), fileNames[i])
	}
	return files
}
