package engine

import (
	"slices"
	"time"
)

// SetBeforeTrigger installs a hook that runs on the coordinator goroutine
// right before each checkpoint's enumerator snapshots.
func SetBeforeTrigger(j *Job, fn func(id int64)) { j.beforeTrigger = fn }

// SetPlacement sets the job's Config.Placement and Config.RemoteErrors
// after it was built (tests build jobs through package stream).
func SetPlacement(j *Job, p Placement, remoteErrors ...error) {
	j.cfg.Placement = p
	j.cfg.RemoteErrors = remoteErrors
}

// Plan describes j's vertices (tasks), one line each: the head's name, the
// chained operators' uids and the parallelism.
func Plan(j *Job) []string { return j.plan() }

var HashKey = hashKey

// Units returns how many failover regions and forward chains j has.
func Units(j *Job) (regions, chains int) { return len(j.regions), len(j.chains) }

// SetMoveInterval sets the job's Config.MoveInterval after it was built.
func SetMoveInterval(j *Job, d time.Duration) { j.cfg.MoveInterval = d }

// PlanMove is planMove over hosts named by strings: hostOf names each
// unit's host, hosts the live ones in order, fixed the units that may not
// move. It returns the unit to move and the name of its new host, or -1.
func PlanMove(hostOf, hosts []string, fixed ...int) (int, string) {
	var of, live []TaskHost
	for _, n := range hostOf {
		of = append(of, namedHost(n))
	}
	for _, n := range hosts {
		live = append(live, namedHost(n))
	}
	u, to, ok := planMove(of, live, func(u int) bool { return !slices.Contains(fixed, u) })
	if !ok {
		return -1, ""
	}
	return u, to.ID()
}

// namedHost is a task host that is only a name, for PlanMove.
type namedHost string

func (h namedHost) ID() string                             { return string(h) }
func (namedHost) session(*attempt) (*remoteSession, error) { return nil, nil }
func (namedHost) live() bool                               { return true }
func (namedHost) exchangeAddr(*Job) string                 { return "" }

// SetLostHostWait sets the job's Config.LostHostWait after it was built.
func SetLostHostWait(j *Job, d time.Duration) { j.cfg.LostHostWait = d }
