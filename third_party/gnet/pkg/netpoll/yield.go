// Copyright (c) 2026 The coregate Authors. All rights reserved.
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.

package netpoll

import "time"

// YieldInterval is the longest a polling loop runs between two passes
// through the Go scheduler (runtime.Gosched).
//
// Upstream gnet yields after every empty poll, which is cheap with
// GOMAXPROCS=1 but, with a second P idle, wakes a spinning thread each
// time the loop goes to sleep. With GOMAXPROCS=1, on the other hand, the
// runtime's sysmon takes the loop's P away whenever epoll_wait blocks
// across two of its ticks (20 µs and up), handing it to another thread.
// A loop run with GOMAXPROCS=2 keeps its P while it blocks, as long as it
// passes through the scheduler at least every 10 ms (forcePreemptNS);
// otherwise sysmon treats it as a goroutine hogging its P and takes the P
// at the next system call. Yielding once a millisecond keeps well inside
// that and costs one wakeup of an idle thread per millisecond.
const YieldInterval = time.Millisecond
