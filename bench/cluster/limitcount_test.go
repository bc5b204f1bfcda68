package cluster

import (
	"net/http"
	"testing"
	"time"
)

// windowLoad makes the results of windows of n admitted requests (the
// last one cut after last of them), each followed by rejections.
func windowLoad(n, windows, last int) []Result {
	t := time.Unix(1000, 0)
	var rs []Result
	for w := 0; w < windows; w++ {
		k := n
		if w == windows-1 {
			k = last
		}
		for i := 0; i < k; i++ {
			t = t.Add(time.Millisecond)
			rs = append(rs, Result{Sent: t, Done: t.Add(time.Microsecond), Status: http.StatusOK, Remaining: n - 1 - i})
		}
		for i := 0; i < 3; i++ {
			t = t.Add(time.Millisecond)
			rs = append(rs, Result{Sent: t, Done: t.Add(time.Microsecond), Status: http.StatusTooManyRequests, Remaining: 0})
		}
	}
	return rs
}

func TestJudgeWindows(t *testing.T) {
	w := JudgeWindows(windowLoad(5, 3, 5), 5)
	if !w.Exact || w.Windows != 3 || w.Admitted != 15 || w.Rejected != 9 || w.Other != 0 || w.InFlight != 0 {
		t.Errorf("3 whole windows of 5: %+v", w)
	}
	// the last window cut by the load's end after 2 admitted requests
	if w := JudgeWindows(windowLoad(5, 3, 2), 5); !w.Exact || w.Windows != 3 || w.Admitted != 12 {
		t.Errorf("a last window cut short: %+v", w)
	}
	// a window that admitted one more: a remaining value seen twice in it
	rs := windowLoad(5, 2, 5)
	extra := rs[2]
	rs = append(rs, extra)
	if w := JudgeWindows(rs, 5); w.Exact {
		t.Errorf("a window admitting 6 of 5 judged exact: %+v", w)
	}
	// a window that admitted fewer (a value missing in the middle)
	rs = windowLoad(5, 3, 5)
	rs[5+3+2].Status = http.StatusTooManyRequests
	if w := JudgeWindows(rs, 5); w.Exact {
		t.Errorf("a window admitting 4 of 5 judged exact: %+v", w)
	}
	// an admitted request without the header, and a 500
	rs = windowLoad(5, 2, 5)
	rs[1].Remaining = -1
	rs = append(rs, Result{Status: http.StatusInternalServerError})
	if w := JudgeWindows(rs, 5); w.Exact || w.Other != 1 {
		t.Errorf("a 200 without X-RateLimit-Remaining, and a 500: %+v", w)
	}
	// a request sent before the second window opened and answered after
	rs = windowLoad(5, 2, 5)
	open := rs[5+3].Sent
	rs[5+2].Done = open.Add(time.Millisecond)
	if w := JudgeWindows(rs, 5); !w.Exact || w.InFlight != 1 || w.InFlightA != 0 {
		t.Errorf("one rejected request in flight at the edge: %+v", w)
	}
}
