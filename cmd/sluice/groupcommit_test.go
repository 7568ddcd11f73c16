package main

// A crash of a Kafka → file pipeline under scan.startup.mode: group-offsets,
// against the real broker of scripts/kafka.sh (skipped without
// SLUICE_KAFKA_BROKERS): the group's offsets never run ahead of the
// committed output, so a re-run without --from loses nothing (it may
// repeat what the crashed run committed after the group's offsets).

import (
	"sync"
	"testing"
	"time"
)

// TestKafkaGroupOffsetsKill9RerunLosesNothing kills a Kafka → file
// pipeline (checkpoints every 20ms) with SIGKILL after it committed part
// of its input. At that moment every record before the group's committed
// offset of its partition must be in the committed output (the source
// commits a checkpoint's offsets to the group only after the file sink
// committed that checkpoint). The SAME pipeline then runs again without
// --from on a fresh checkpoint directory until the output holds every
// input id: none is missing (duplicates are allowed: at-least-once).
func TestKafkaGroupOffsetsKill9RerunLosesNothing(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers := kafkaBrokers(t)
	in := kafkaTopic(t, brokers, nil)
	group := "g-" + in
	out := t.TempDir()
	file := writePipeline(t, t.TempDir(), groupPipeline)
	env := func() []string {
		return []string{"BROKERS=" + brokers, "IN=" + in, "GROUP=" + group, "OUT=" + out, "CK=" + t.TempDir(), "INTERVAL=20ms"}
	}
	const n, batch = 6000, 50
	// id i at partition i%2, offset i/2; the first batch before the
	// start, the rest while the pipeline runs (so the kill is mid-stream).
	produceIDs(t, brokers, in, 0, batch, nil)
	p := start(t, env(), "run", "--progress", "off", file)
	produced := make(chan struct{})
	waitProduced := sync.OnceFunc(func() { <-produced })
	defer waitProduced()
	go func() {
		defer close(produced)
		for from := batch; from < n; from += batch {
			produceIDs(t, brokers, in, from, from+batch, nil)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	waitRecords(t, p, out, n/4)
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	waitProduced()
	g := groupOffsets(t, brokers, group, in)
	got := readOutput(t, out, "id")
	for part := range int64(2) {
		for off := range g[part] {
			if id := 2*off + part; got[id] == 0 {
				t.Fatalf("after kill -9 the group has offsets %v but id %d (partition %d offset %d) is not in the committed output: a re-run without --from would lose it\n%s",
					g, id, part, off, p.stderr())
			}
		}
	}

	p = start(t, env(), "run", "--progress", "off", file)
	var missing []int64
	for range 1200 {
		got = readOutput(t, out, "id")
		missing = missing[:0]
		for id := range int64(n) {
			if got[id] == 0 {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 {
			break
		}
		select {
		case <-p.done:
			t.Fatalf("the re-run ended with %d ids missing %v:\n%s", len(missing), head(missing), p.stderr())
		case <-time.After(100 * time.Millisecond):
		}
	}
	stopWithSIGTERM(t, p)
	if len(missing) > 0 {
		t.Fatalf("after the re-run %d ids are missing from the output: %v", len(missing), head(missing))
	}
	dups := 0
	for id, c := range readOutput(t, out, "id") {
		if id < 0 || id >= n {
			t.Fatalf("unexpected id %d in the output", id)
		}
		dups += c - 1
	}
	t.Logf("group offsets at the kill %v; %d duplicates after the re-run", g, dups)
}
