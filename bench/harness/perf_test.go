package harness

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadPerfCSV(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perf.csv")
	data := "# started on Tue Dec  1 15:10:56 2026\n\n" +
		"1234.5,msec,task-clock,1234500000,100.00,0.5,CPUs utilized\n" +
		"<not counted>,,context-switches,0,100.00,,\n" +
		"7,,syscalls:sys_enter_epoll_wait,939530,100.00,,\n" +
		"3,,syscalls:sys_enter_epoll_wait,939530,100.00,,\n"
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := readPerfCSV(path)
	if err != nil {
		t.Fatal(err)
	}
	if m["task-clock"] != 1234.5 || m["context-switches"] != 0 || m["syscalls:sys_enter_epoll_wait"] != 10 {
		t.Fatalf("%v", m)
	}
	if err := os.WriteFile(path, []byte("# nothing\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readPerfCSV(path); err == nil {
		t.Fatal("an empty file read without error")
	}
}
