package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sluice-io/sluice/checkpoint"
)

// TaskHost is where subtasks run: Local, the coordinator's own process, or
// a *Remote (another process, or a Loopback). Only this package implements
// it.
type TaskHost interface {
	// ID names the host in logs and placement errors.
	ID() string
	// session returns the host's session for attempt a (nil for Local),
	// opening it on first use.
	session(a *attempt) (*remoteSession, error)
	// live reports whether subtasks may be placed on the host now.
	live() bool
}

// Local is the coordinator's own process as a task host.
var Local TaskHost = localHost{}

type localHost struct{}

func (localHost) ID() string                               { return "local" }
func (localHost) session(*attempt) (*remoteSession, error) { return nil, nil }
func (localHost) live() bool                               { return true }

// Placement says which task hosts a job may use. The engine places each
// failover region (the subtasks that forward edges connect) on one of them
// by a fixed rule (see placeAttempt and placeRestart, and docs/cluster.md):
// spread evenly when an attempt starts, kept where it ran or moved to the
// least loaded live host when it restarts.
type Placement interface {
	// Hosts returns the hosts that may run subtasks now, in placement
	// order. It is called on the coordinator goroutine when an attempt
	// starts and when a region restarts; hosts that are not live (a
	// Remote whose link broke) are skipped.
	Hosts() []TaskHost
}

// Hosts is a fixed Placement.
type Hosts []TaskHost

// Hosts returns h.
func (h Hosts) Hosts() []TaskHost { return h }

// errNoHost fails the placement of a region when no host is live.
var errNoHost = errors.New("no live task host to place subtasks on")

// placement is an attempt's record of where its regions run.
type placement struct {
	hostOf []TaskHost // by region; nil before the region was placed
	// single says why the whole job runs on one host, or "".
	single string
}

// liveHosts returns the live hosts of the job's Placement (Local without
// one).
func (a *attempt) liveHosts() []TaskHost {
	p := a.job.cfg.Placement
	if p == nil {
		return []TaskHost{Local}
	}
	var out []TaskHost
	for _, h := range p.Hosts() {
		if h != nil && h.live() {
			out = append(out, h)
		}
	}
	return out
}

// singleHostReason says why a job runs on one host whatever the hosts, or
// "".
func singleHostReason(vs []*vertex, regions int) string {
	if regions == 1 {
		return "the job is one failover region (it has a rebalance or hash edge, and edges do not cross hosts yet)"
	}
	for _, v := range vs {
		if h := v.head(); h.kind == kindSource {
			if al, ok := h.src.(interface{ aligned() bool }); ok && al.aligned() {
				return fmt.Sprintf("source %q aligns watermarks, and alignment groups are kept in one process", h.name)
			}
		}
	}
	return ""
}

// placeAttempt places every region for a new attempt: region r on
// hosts[r mod n] of the live hosts, or every region on hosts[0] when the
// job cannot spread (see singleHostReason).
func (a *attempt) placeAttempt() error {
	j := a.job
	a.pl.hostOf = make([]TaskHost, len(j.regions))
	if j.cfg.Placement == nil {
		for r := range a.pl.hostOf {
			a.pl.hostOf[r] = Local
		}
		return nil
	}
	hosts := a.liveHosts()
	if len(hosts) == 0 {
		return errNoHost
	}
	a.pl.single = singleHostReason(j.vertices, len(j.regions))
	a.pl.hostOf = spread(len(j.regions), hosts, a.pl.single != "")
	j.log.Info("subtasks placed", "attempt", a.number, "placement", a.pl.describe(j.regions))
	if a.pl.single != "" && len(hosts) > 1 {
		j.log.Info("the job runs on one task host", "host", hosts[0].ID(), "reason", a.pl.single)
	}
	return nil
}

// placeRestart places region r for a regional restart: on its host if that
// is still live, else on the live host that runs the fewest regions (the
// first in order on ties).
func (a *attempt) placeRestart(r int) (TaskHost, error) {
	if a.job.cfg.Placement == nil {
		return Local, nil
	}
	hosts := a.liveHosts()
	if len(hosts) == 0 {
		return nil, fmt.Errorf("region %d: %w", r, errNoHost)
	}
	return pickRestart(r, a.pl.hostOf, hosts, a.pl.single != ""), nil
}

// spread is the placement of an attempt's regions: region r on hosts[r mod
// n], or all on hosts[0] when single.
func spread(regions int, hosts []TaskHost, single bool) []TaskHost {
	out := make([]TaskHost, regions)
	for r := range out {
		out[r] = hosts[0]
		if !single {
			out[r] = hosts[r%len(hosts)]
		}
	}
	return out
}

// pickRestart is the host of region r for a regional restart, given where
// the regions run (hostOf) and the live hosts: its own if live; else the
// live host with the fewest other regions, the first in order on ties
// (hosts[0] when single).
func pickRestart(r int, hostOf []TaskHost, hosts []TaskHost, single bool) TaskHost {
	for _, h := range hosts {
		if h == hostOf[r] {
			return h
		}
	}
	if single {
		return hosts[0]
	}
	load := make([]int, len(hosts))
	for q, h := range hostOf {
		for i, c := range hosts {
			if q != r && c == h {
				load[i]++
			}
		}
	}
	best := 0
	for i := range hosts {
		if load[i] < load[best] {
			best = i
		}
	}
	return hosts[best]
}

// describe lists the regions of each host, for the log.
func (p *placement) describe(regions [][]taskKey) string {
	var b strings.Builder
	for r, h := range p.hostOf {
		if r > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "region %d (%d subtasks) on %s", r, len(regions[r]), h.ID())
	}
	return b.String()
}

// placeTasks places the attempt's regions and makes the tasks of regions on
// other hosts stand-ins that mail there.
func (a *attempt) placeTasks() error {
	if err := a.placeAttempt(); err != nil {
		return err
	}
	for r, h := range a.pl.hostOf {
		s, err := h.session(a)
		if err != nil {
			return fmt.Errorf("place region %d on task host %s: %w", r, h.ID(), err)
		}
		if s == nil {
			continue
		}
		for _, k := range a.job.regions[r] {
			a.tasks[a.vertexByID[k.vertex]][k.subtask].remote = s
		}
	}
	return nil
}

// deployRemote builds tasks placed on other hosts there, one deployment per
// host.
func deployRemote(tasks []*task, states map[taskKey]map[string]*checkpoint.TaskState) error {
	var order []*remoteSession
	by := map[*remoteSession][]*task{}
	for _, t := range tasks {
		if by[t.remote] == nil {
			order = append(order, t.remote)
		}
		by[t.remote] = append(by[t.remote], t)
	}
	for _, s := range order {
		if err := s.deploy(by[s], states); err != nil {
			return err
		}
	}
	return nil
}
