package engine

import "testing"

// TestVerifiedTxnCheckAllocatesNothing pins the check every transactional
// batch makes once its transaction is verified on the partition.
func TestVerifiedTxnCheckAllocatesNothing(t *testing.T) {
	br := benchBroker(t)
	p := br.Topic("bench").Partition(0)
	var v verifiedTxns
	v.set(p, 7, 3)
	if !v.ok(p, 7, 3) || v.ok(p, 7, 4) || v.ok(p, 8, 3) {
		t.Fatal("verified transactions: wrong answers")
	}
	if n := testing.AllocsPerRun(1000, func() { v.ok(p, 7, 3) }); n != 0 {
		t.Fatalf("%v allocations per check", n)
	}
	v.forget(p, 7)
	if v.ok(p, 7, 3) {
		t.Fatal("a forgotten transaction is still verified")
	}
}
