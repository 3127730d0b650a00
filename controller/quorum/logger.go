package quorum

import (
	"fmt"
	"log/slog"
	"os"
)

// raftLogger routes etcd raft's log lines into slog. raft logs every
// election and term change at Info; those are worth keeping at Debug here,
// where the controller logs leadership changes itself.
type raftLogger struct{ l *slog.Logger }

func (r raftLogger) Debug(v ...any)              { r.l.Debug(fmt.Sprint(v...), "from", "raft") }
func (r raftLogger) Debugf(f string, v ...any)   { r.l.Debug(fmt.Sprintf(f, v...), "from", "raft") }
func (r raftLogger) Info(v ...any)               { r.l.Debug(fmt.Sprint(v...), "from", "raft") }
func (r raftLogger) Infof(f string, v ...any)    { r.l.Debug(fmt.Sprintf(f, v...), "from", "raft") }
func (r raftLogger) Warning(v ...any)            { r.l.Warn(fmt.Sprint(v...), "from", "raft") }
func (r raftLogger) Warningf(f string, v ...any) { r.l.Warn(fmt.Sprintf(f, v...), "from", "raft") }
func (r raftLogger) Error(v ...any)              { r.l.Error(fmt.Sprint(v...), "from", "raft") }
func (r raftLogger) Errorf(f string, v ...any)   { r.l.Error(fmt.Sprintf(f, v...), "from", "raft") }
func (r raftLogger) Fatal(v ...any)              { r.l.Error(fmt.Sprint(v...), "from", "raft"); os.Exit(1) }
func (r raftLogger) Fatalf(f string, v ...any) {
	r.l.Error(fmt.Sprintf(f, v...), "from", "raft")
	os.Exit(1)
}
func (r raftLogger) Panic(v ...any)            { panic(fmt.Sprint(v...)) }
func (r raftLogger) Panicf(f string, v ...any) { panic(fmt.Sprintf(f, v...)) }
