package file

import "sync"

// liveWriters are the open writers of one sink value, by job, subtask and
// the attempt that built them (sink.InitContext.Attempt). The runtime builds
// every writer of an attempt before any of them writes, so a writer may
// remove what an old subtask left behind under that subtask's name when
// the subtask runs again in its own attempt; but a region restarted alone
// gets an attempt of its own while the other regions' writers go on
// writing, and a writer that restored the state of an old subtask j must
// then leave j's files alone if writer j is open in another attempt: they
// are its new files (j's leftovers were removed when the two were built
// together).
type liveWriters struct {
	mu sync.Mutex
	n  map[liveKey]int // open writers
}

type liveKey struct {
	job          string
	sub, attempt int
}

func (l *liveWriters) add(k liveKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == nil {
		l.n = map[liveKey]int{}
	}
	l.n[k]++
}

func (l *liveWriters) remove(k liveKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[k]--; l.n[k] <= 0 {
		delete(l.n, k)
	}
}

// elsewhere reports whether a writer of job and subtask sub built by
// another attempt than attempt is open.
func (l *liveWriters) elsewhere(job string, sub, attempt int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.n {
		if k.job == job && k.sub == sub && k.attempt != attempt {
			return true
		}
	}
	return false
}
