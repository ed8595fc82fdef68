// Command gorand prints values of Go's math/rand (v1) stream for a seed, so that the trace-replay benchmark
// (bench/trace_replay.py) can rebuild the task order of the FGD simulator's workload tuning bit for bit.
//
//	gorand SEED OP...
//
// The source is rand.New(rand.NewSource(SEED)): the same stream as the package-level functions after
// rand.Seed(SEED) (which Go >= 1.24 ignores by default). Each OP prints one line of space-separated integers:
//
//	int          one r.Int()
//	shuffle:N    r.Shuffle(N, swap) applied to 0..N-1; prints the resulting order
//	intn:NxK     K draws of r.Intn(N)
//	down:NxK     K draws r.Intn(N), r.Intn(N-1), ... (removing one item of N per draw)
//
// Built by the benchmark into ~/.cache/dra-scheduler/ (never committed).
package main

import (
	"bufio"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "gorand: "+format+"\n", args...)
	os.Exit(2)
}

func atoi(s string) int {
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 {
		fail("not a non-negative integer: %q", s)
	}
	return v
}

func sizes(arg string) (int, int) {
	n, k, ok := strings.Cut(arg, "x")
	if !ok {
		fail("want NxK, got %q", arg)
	}
	return atoi(n), atoi(k)
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: gorand SEED OP... (OP: int | shuffle:N | intn:NxK | down:NxK)")
	}
	seed, err := strconv.ParseInt(os.Args[1], 10, 64)
	if err != nil {
		fail("bad seed %q", os.Args[1])
	}
	r := rand.New(rand.NewSource(seed))
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for _, op := range os.Args[2:] {
		name, arg, _ := strings.Cut(op, ":")
		var vals []int
		switch name {
		case "int":
			vals = []int{r.Int()}
		case "shuffle":
			vals = make([]int, atoi(arg))
			for i := range vals {
				vals[i] = i
			}
			r.Shuffle(len(vals), func(i, j int) { vals[i], vals[j] = vals[j], vals[i] })
		case "intn", "down":
			n, k := sizes(arg)
			if name == "down" && k > n {
				fail("down:%dx%d draws more than it removes", n, k)
			}
			for i := 0; i < k; i++ {
				m := n
				if name == "down" {
					m = n - i
				}
				if m <= 0 {
					fail("intn of %d", m)
				}
				vals = append(vals, r.Intn(m))
			}
		default:
			fail("unknown op %q", op)
		}
		for i, v := range vals {
			if i > 0 {
				out.WriteByte(' ')
			}
			out.WriteString(strconv.Itoa(v))
		}
		out.WriteByte('\n')
	}
}
