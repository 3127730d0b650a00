package bench

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// startProgress prints a live line every interval until the returned stop
// is called. On a terminal the line is rewritten in place.
func (r *run) startProgress(w io.Writer, every time.Duration) (stop func()) {
	inPlace := isTerminal(w)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		var lastP, lastPB, lastC, lastCB int64
		last := time.Now()
		for {
			select {
			case <-done:
				if inPlace {
					fmt.Fprintln(w)
				}
				return
			case now := <-t.C:
				p, pb := r.produced.Load(), r.producedBytes.Load()
				c, cb := r.consumed.Load(), r.consumedBytes.Load()
				dt := now.Sub(last).Seconds()
				line := fmt.Sprintf("[%5.1fs] produce %8.0f rec/s %7.1f MB/s | consume %8.0f rec/s %7.1f MB/s | ack p99 %s | e2e p99 %s | errors %d",
					now.Sub(r.start).Seconds(),
					float64(p-lastP)/dt, float64(pb-lastPB)/dt/1e6,
					float64(c-lastC)/dt, float64(cb-lastCB)/dt/1e6,
					fmtMs(r.ack.Summary().P99), fmtMs(r.e2e.Summary().P99), r.errs.Load())
				if inPlace {
					fmt.Fprintf(w, "\r%s\x1b[K", line)
				} else {
					fmt.Fprintln(w, line)
				}
				lastP, lastPB, lastC, lastCB, last = p, pb, c, cb, now
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
}

func fmtMs(ms float64) string {
	if ms == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fms", ms)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
