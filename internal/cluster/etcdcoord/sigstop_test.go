package etcdcoord_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/cluster/coord"
	"github.com/sluice-io/sluice/internal/cluster/etcdcoord"
)

// nodeChildEnv makes the test binary act as a node process (see
// nodeChildMain) instead of running tests.
const nodeChildEnv = "SLUICE_ETCDCOORD_NODE_CHILD"

// nodeChildMain is a minimal node process: it joins the cluster at the
// endpoints in $SLUICE_ETCDCOORD_NODE_CHILD with a 1s lease, campaigns,
// prints "leader <term>", then for each stdin line "publish <id>" tries to
// publish that checkpoint and prints "ok" or "err fenced=<bool> <error>".
// It exits at the end of stdin.
func nodeChildMain() int {
	eps := strings.Split(os.Getenv(nodeChildEnv), ",")
	ctx := context.Background()
	n, err := etcdcoord.New(ctx, eps, etcdcoord.WithPrefix("/job/"), etcdcoord.WithLeaseTTL(time.Second))
	if err != nil {
		fmt.Println("err", err)
		return 1
	}
	defer n.Close()
	if err := n.Join(ctx, coord.Member{ID: "child", Addr: "127.0.0.1:7100"}); err != nil {
		fmt.Println("err", err)
		return 1
	}
	l, err := n.Campaign(ctx)
	if err != nil {
		fmt.Println("err", err)
		return 1
	}
	fmt.Println("leader", l.Term())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		id, err := strconv.ParseInt(strings.TrimPrefix(sc.Text(), "publish "), 10, 64)
		if err != nil {
			fmt.Println("err bad command", sc.Text())
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = coord.PublishCheckpoint(pctx, l, coord.CheckpointPointer{ID: id, Location: fmt.Sprintf("file:///cp/%d", id)})
		cancel()
		if err != nil {
			fmt.Printf("err fenced=%v %v\n", errors.Is(err, coord.ErrFenced), err)
		} else {
			fmt.Println("ok")
		}
	}
	return 0
}

// TestSIGSTOPLeader stops a leader process with SIGSTOP past its lease
// TTL, lets another node take over and complete a checkpoint, resumes the
// old leader with SIGCONT and has it try to complete one: etcd refuses it
// (ErrFenced) and the pointer stays the new leader's.
func TestSIGSTOPLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node process; skipped with -short")
	}
	ec := startEtcd(t, 1)
	eps := ec.endpoints()

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), nodeChildEnv+"="+strings.Join(eps, ","))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the node process: %v", err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGCONT)
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(step):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	next := func(what string) string {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("node process exited while waiting for %s", what)
			}
			return l
		case <-time.After(step):
			t.Fatalf("no %s from the node process within %v", what, step)
		}
		return ""
	}
	send := func(cmdline string) {
		t.Helper()
		if _, err := fmt.Fprintln(stdin, cmdline); err != nil {
			t.Fatalf("writing to the node process: %v", err)
		}
	}

	first := next("leader line")
	oldTerm, err := strconv.ParseInt(strings.TrimPrefix(first, "leader "), 10, 64)
	if err != nil {
		t.Fatalf("node process said %q, want \"leader <term>\"", first)
	}
	send("publish 1")
	if got := next("publish 1 result"); got != "ok" {
		t.Fatalf("publish 1 by the node process: %s", got)
	}

	n1 := newNode(t, eps, "n1", etcdcoord.WithLeaseTTL(5*time.Second))
	won := make(chan coord.Leadership, 1)
	ctx := stepCtx(t)
	go func() {
		l, err := campaign(ctx, n1)
		if err != nil {
			t.Errorf("Campaign(n1): %v", err)
		}
		won <- l
	}()

	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP: %v", err)
	}
	t.Logf("SIGSTOP node process %d (leader at term %d)", pid, oldTerm)
	l1 := <-won
	if l1 == nil {
		t.FailNow()
	}
	t.Logf("n1 leads at term %d", l1.Term())
	publish(t, l1, 2)
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatalf("SIGCONT: %v", err)
	}
	send("publish 3")
	if got := next("publish 3 result"); !strings.HasPrefix(got, "err fenced=true") {
		t.Fatalf("publish 3 by the resumed old leader: %q, want it fenced", got)
	} else {
		t.Logf("resumed old leader: %s", got)
	}
	wantPointer(t, n1, 2, l1.Term())
}
