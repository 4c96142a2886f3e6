package fencing

import "time"

// FreezeRenewal makes the renewal of s's lock do nothing for d, as in a
// process paused for d (the storms pause one goroutine, not the process).
func FreezeRenewal(s TokenSource, d time.Duration) {
	var g *grant
	switch s := s.(type) {
	case *LeaseSource:
		g = &s.g
	case *RedisSource:
		g = &s.g
	default:
		return
	}
	g.mu.Lock()
	g.frozen = time.Now().Add(d)
	g.mu.Unlock()
}
