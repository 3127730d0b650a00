package group

import (
	"sort"
	"sync"
	"time"
)

// Clock is the coordinator's only source of time: every deadline (sessions,
// rebalance and initial delays, pending member ids, the retention sweep)
// is a timer from it and every timestamp is its Now. Tests drive a
// FakeClock and never sleep.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine (real clock) or inside
	// FakeClock.Advance once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending call of a Clock (a *time.Timer satisfies it).
type Timer interface {
	// Stop cancels the call; false if it already ran or was stopped.
	Stop() bool
	// Reset schedules the call again, d from now.
	Reset(d time.Duration) bool
}

// RealClock is the wall clock.
type RealClock struct{}

func (RealClock) Now() time.Time { return time.Now() }

func (RealClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// FakeClock is a clock that moves only when Advance is called; timers due
// by then run inside Advance, in deadline order, on the caller's
// goroutine.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer // armed timers; Invariant: every t.armed
}

// NewFakeClock starts a fake clock at now.
func NewFakeClock(now time.Time) *FakeClock { return &FakeClock{now: now} }

func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *FakeClock) AfterFunc(d time.Duration, f func()) Timer {
	t := &fakeTimer{c: c, f: f}
	t.Reset(d)
	return t
}

// Advance moves the clock d forward, running each timer that falls due at
// its deadline (so a callback sees Now equal to its deadline). Timers a
// callback arms within the window run too.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	for {
		t := c.nextDue(end)
		if t == nil {
			break
		}
		c.now = t.at
		c.unarm(t)
		c.mu.Unlock()
		t.f()
		c.mu.Lock()
	}
	c.now = end
	c.mu.Unlock()
}

// Pending is the number of armed timers.
func (c *FakeClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// nextDue is the earliest armed timer due by end; c.mu is held.
func (c *FakeClock) nextDue(end time.Time) *fakeTimer {
	sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at.Before(c.timers[j].at) })
	if len(c.timers) == 0 || c.timers[0].at.After(end) {
		return nil
	}
	return c.timers[0]
}

// unarm removes t from the armed timers; c.mu is held.
func (c *FakeClock) unarm(t *fakeTimer) bool {
	for i, o := range c.timers {
		if o == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return true
		}
	}
	return false
}

type fakeTimer struct {
	c  *FakeClock
	f  func()
	at time.Time // deadline while armed
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.c.unarm(t)
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.c.unarm(t)
	t.at = t.c.now.Add(d)
	t.c.timers = append(t.c.timers, t)
	return was
}
