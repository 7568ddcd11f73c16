package engine

import (
	"errors"
	"fmt"
	"slices"
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
	// exchangeAddr is where the host's record exchange server is
	// reached (Network.Addr of its process), or "".
	exchangeAddr(j *Job) string
}

// Local is the coordinator's own process as a task host.
var Local TaskHost = localHost{}

type localHost struct{}

func (localHost) ID() string                               { return "local" }
func (localHost) session(*attempt) (*remoteSession, error) { return nil, nil }
func (localHost) live() bool                               { return true }
func (localHost) exchangeAddr(j *Job) string {
	if j.cfg.Network == nil {
		return ""
	}
	return j.cfg.Network.Addr
}

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

// placement is an attempt's record of where its placement units run: its
// failover regions, or with a Network its forward chains (see
// Job.placementUnits).
type placement struct {
	units  [][]taskKey
	unitOf map[taskKey]int
	chains bool       // the units are forward chains
	hostOf []TaskHost // by unit; nil before the unit was placed
	// moveTo is where a unit that is being moved (planMove) restarts, by
	// unit; nil for the others.
	moveTo []TaskHost
	// single says why the whole job runs on one host, or "".
	single string
}

// hostOfTask is the host of subtask k (Local before placement).
func (p *placement) hostOfTask(k taskKey) TaskHost {
	if p.unitOf == nil {
		return Local
	}
	return p.hostOf[p.unitOf[k]]
}

// placementUnits returns what the job places on one host each: with a
// Network and a Placement, the forward chains (subtasks that forward
// edges connect; a rebalance or hash edge between them may cross hosts);
// otherwise the failover regions, so that no edge crosses hosts.
func (j *Job) placementUnits() (units [][]taskKey, of map[taskKey]int, chains bool) {
	if j.cfg.Network != nil && j.cfg.Placement != nil {
		return j.chains, j.chainOf, true
	}
	return j.regions, j.regionOf, false
}

// liveHosts returns the live hosts of the job's Placement (Local without
// one).
func (a *attempt) liveHosts() []TaskHost {
	p := a.job.cfg.Placement
	if p == nil {
		return []TaskHost{Local}
	}
	_, _, chains := a.job.placementUnits()
	var out []TaskHost
	for _, h := range p.Hosts() {
		if h == nil || !h.live() {
			continue
		}
		if chains && h.exchangeAddr(a.job) == "" {
			// Edges may cross hosts: a host others cannot send to
			// takes no subtask.
			continue
		}
		out = append(out, h)
	}
	return out
}

// singleHostReason says why a job runs on one host whatever the hosts, or
// "".
func singleHostReason(vs []*vertex, units int, chains bool) string {
	if units == 1 && !chains {
		return "the job is one failover region (it has a rebalance or hash edge, and such edges cross task hosts only with a record exchange: engine.Config.Network)"
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

// placeAttempt places every unit (region, or forward chain with a
// Network) for a new attempt: unit u on hosts[u mod n] of the live hosts,
// or every unit on hosts[0] when the job cannot spread (see
// singleHostReason).
func (a *attempt) placeAttempt() error {
	j := a.job
	a.pl.units, a.pl.unitOf, a.pl.chains = j.placementUnits()
	a.pl.hostOf = make([]TaskHost, len(a.pl.units))
	a.pl.moveTo = make([]TaskHost, len(a.pl.units))
	if j.cfg.Placement == nil {
		for u := range a.pl.hostOf {
			a.pl.hostOf[u] = Local
		}
		return nil
	}
	hosts := a.liveHosts()
	if len(hosts) == 0 {
		return errNoHost
	}
	a.pl.single = singleHostReason(j.vertices, len(a.pl.units), a.pl.chains)
	a.pl.hostOf = spread(len(a.pl.units), hosts, a.pl.single != "")
	j.log.Info("subtasks placed", "attempt", a.number, "placement", a.pl.describe())
	if a.pl.single != "" && len(hosts) > 1 {
		j.log.Info("the job runs on one task host", "host", hosts[0].ID(), "reason", a.pl.single)
	}
	if a.pl.chains {
		return a.checkCodecs()
	}
	return nil
}

// placeRestart places the units of region r for a regional restart: each
// on its host if that is still live, else on the live host that runs the
// fewest units (the first in order on ties). It records and returns the
// units' hosts and the units that moved.
func (a *attempt) placeRestart(r int) (moved []int, err error) {
	if a.job.cfg.Placement == nil {
		return nil, nil
	}
	hosts := a.liveHosts()
	if len(hosts) == 0 {
		return nil, fmt.Errorf("region %d: %w", r, errNoHost)
	}
	for u, keys := range a.pl.units {
		if a.job.regionOf[keys[0]] != r {
			continue
		}
		h := pickRestart(u, a.pl.hostOf, hosts, a.pl.single != "")
		if to := a.pl.moveTo[u]; to != nil {
			a.pl.moveTo[u] = nil
			if slices.Contains(hosts, to) {
				h = to
			}
		}
		if h != a.pl.hostOf[u] {
			moved = append(moved, u)
			a.job.log.Info("region placed on another task host", "region", r, "unit", u, "from", a.pl.hostOf[u].ID(), "to", h.ID())
		}
		a.pl.hostOf[u] = h
	}
	if a.pl.chains {
		return moved, a.checkCodecs()
	}
	return moved, nil
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

// planMove is the rule that gives work to a host that linked after the
// attempt started: given where the units run (hostOf), the live hosts in
// placement order and which units may move, with n units on h live hosts,
// the first host in order that runs more than ceil(n/h) units gives its
// last movable unit to the live host that runs the fewest (the first in
// order on ties). It returns that unit and host, or ok false when no host
// runs more than its share, or when a unit runs on a host that is not live
// (its failover comes first).
func planMove(hostOf, hosts []TaskHost, movable func(u int) bool) (unit int, to TaskHost, ok bool) {
	if len(hosts) < 2 {
		return 0, nil, false
	}
	load := make([]int, len(hosts))
	for _, h := range hostOf {
		i := slices.Index(hosts, h)
		if i < 0 {
			return 0, nil, false
		}
		load[i]++
	}
	share := (len(hostOf) + len(hosts) - 1) / len(hosts)
	from := slices.IndexFunc(load, func(n int) bool { return n > share })
	if from < 0 {
		return 0, nil, false
	}
	least := 0
	for i := range hosts {
		if load[i] < load[least] {
			least = i
		}
	}
	for u := len(hostOf) - 1; u >= 0; u-- {
		if hostOf[u] == hosts[from] && movable(u) {
			return u, hosts[least], true
		}
	}
	return 0, nil, false
}

// describe lists the units of each host, for the log.
func (p *placement) describe() string {
	var b strings.Builder
	word := "region"
	if p.chains {
		word = "chain"
	}
	for u, h := range p.hostOf {
		if u > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s %d (%d subtasks) on %s", word, u, len(p.units[u]), h.ID())
	}
	return b.String()
}

// placeTasks places the attempt's regions and makes the tasks of regions on
// other hosts stand-ins that mail there.
func (a *attempt) placeTasks() error {
	if err := a.placeAttempt(); err != nil {
		return err
	}
	for u, h := range a.pl.hostOf {
		s, err := h.session(a)
		if err != nil {
			return fmt.Errorf("place unit %d on task host %s: %w", u, h.ID(), err)
		}
		if s == nil {
			continue
		}
		for _, k := range a.pl.units[u] {
			a.tasks[a.vertexByID[k.vertex]][k.subtask].remote = s
		}
	}
	return nil
}

// deployRemote builds tasks placed on other hosts there, one deployment per
// host.
func (a *attempt) deployRemote(tasks []*task, states map[taskKey]map[string]*checkpoint.TaskState) error {
	var order []*remoteSession
	by := map[*remoteSession][]*task{}
	for _, t := range tasks {
		if by[t.remote] == nil {
			order = append(order, t.remote)
		}
		by[t.remote] = append(by[t.remote], t)
	}
	for _, s := range order {
		rt, err := a.routesFor(s.r.id)
		if err != nil {
			return err
		}
		if err := s.deploy(by[s], states, rt); err != nil {
			return err
		}
	}
	return nil
}
