package engine

import "testing"

// TestCoordViewDecisions checks the coordinator's decisions about
// periodic checkpoints, savepoints and the end of the job, one row per
// situation.
func TestCoordViewDecisions(t *testing.T) {
	cases := []struct {
		name      string
		v         coordView
		canTrig   error
		periodic  bool
		savepoint bool
		finishing bool
		finish    finishStep
	}{
		{name: "running, nothing pending", v: coordView{}, periodic: true, savepoint: true, finish: finishWait},
		{name: "running, the tracker says too soon", v: coordView{}, canTrig: errTooSoon, periodic: false, savepoint: true, finish: finishWait},
		{name: "running, a checkpoint pending", v: coordView{pending: true}, canTrig: errInProgress, periodic: false, savepoint: false, finish: finishWait},
		{name: "a region is down", v: coordView{regionDown: true}, periodic: false, savepoint: false, finish: finishWait},
		{name: "all input ended: take the final checkpoint", v: coordView{allFinished: true}, periodic: false, savepoint: false, finishing: true, finish: finishTriggerFinal},
		{name: "all input ended, a checkpoint pending: wait for it", v: coordView{allFinished: true, pending: true}, finishing: true, finish: finishWait},
		{name: "all input ended, a region down: wait for it", v: coordView{allFinished: true, regionDown: true}, finishing: true, finish: finishWait},
		{name: "stop requested: take the final checkpoint", v: coordView{stopping: true}, periodic: false, savepoint: true, finish: finishTriggerFinal},
		{name: "stop requested, a checkpoint pending", v: coordView{stopping: true, pending: true}, finish: finishWait},
		{name: "final checkpoint pending", v: coordView{stopping: true, pending: true, pendingFinal: true}, finishing: true, finish: finishWait},
		{name: "final checkpoint complete, not committed", v: coordView{allFinished: true, finalID: 7}, finishing: true, finish: finishWait},
		{name: "final checkpoint committed: done", v: coordView{allFinished: true, finalID: 7, finalCommitted: true}, finishing: true, finish: finishDone},
		{name: "stopped, final checkpoint committed: done", v: coordView{stopping: true, finalID: 7, finalCommitted: true}, savepoint: true, finishing: true, finish: finishDone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.v.periodicDue(tc.canTrig); got != tc.periodic {
				t.Errorf("periodicDue = %v, want %v", got, tc.periodic)
			}
			if got := tc.v.savepointMayStart(); got != tc.savepoint {
				t.Errorf("savepointMayStart = %v, want %v", got, tc.savepoint)
			}
			if got := tc.v.finishing(); got != tc.finishing {
				t.Errorf("finishing = %v, want %v", got, tc.finishing)
			}
			if got := tc.v.finish(); got != tc.finish {
				t.Errorf("finish = %v, want %v", got, tc.finish)
			}
		})
	}
}
