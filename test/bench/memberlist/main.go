// The memberlist side of `npm run bench:gossip` (issue 22): hashicorp/memberlist v0.7.0 run through the same
// procedure as test/bench/gossip.bench.ts, with the same timers, on 127.0.0.1 with AES-GCM (SecretKey), one
// process. It prints one JSON line per size for the TypeScript bench to print beside ours.
//
// Timers: DefaultWANConfig divided by 10 as ours (probe 500 ms, probe timeout 300 ms, gossip every 50 ms to 4,
// indirect checks 3, push-pull 3 s scaled above 32 members, gossip to the dead 3 s, TCP timeout 1 s).
// Suspicion: ours is Lifeguard's 3 s shrinking to 1 s with k = 3 confirmations. Stock memberlist cannot express
// it: its minimum is SuspicionMult * max(1, log10 N) * ProbeInterval and its k is SuspicionMult - 2, so k = 3
// needs SuspicionMult = 5 and a minimum of at least 2.5 s. We match the floor instead: SuspicionMult = 2, the
// smallest whose minimum is not below our 1 s at any N (1.0 s at N <= 10, 1.5 s at 32, 1.8 s at 64; with 1 the
// minimum is 0.75 s at 32 and 0.9 s at 64, and a run on this loaded machine declared live members dead thousands
// of times). It makes k = 0, and then memberlist uses the minimum as a fixed timeout (suspicion.go: "if k < 1
// { timeout = min }"). The timeout used is printed.
//
// Usage: go run . N...   (from test/bench/memberlist; each size prints one JSON line)
package main

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

const (
	probeInterval = 500 * time.Millisecond
	trials        = 5
	steadyWindow  = 12 * time.Second
)

var sent atomic.Int64 // bytes written to UDP and TCP by every member

// countingTransport is memberlist's own NetTransport with every byte it writes counted.
type countingTransport struct {
	*memberlist.NetTransport
	streams chan net.Conn
}

type countingConn struct{ net.Conn }

func (c countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	sent.Add(int64(n))
	return n, err
}

func (t *countingTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	sent.Add(int64(len(b)))
	return t.NetTransport.WriteTo(b, addr)
}

func (t *countingTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	sent.Add(int64(len(b)))
	return t.NetTransport.WriteToAddress(b, a)
}

func (t *countingTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	c, err := t.NetTransport.DialTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	return countingConn{c}, nil
}

func (t *countingTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	c, err := t.NetTransport.DialAddressTimeout(a, timeout)
	if err != nil {
		return nil, err
	}
	return countingConn{c}, nil
}

func (t *countingTransport) StreamCh() <-chan net.Conn { return t.streams }

// views: what each member lists as alive (joined and not yet declared dead or left), from its event delegate.
type view struct {
	mu    sync.Mutex
	alive map[string]bool
}

type events struct{ v *view }

var (
	killedMu    sync.Mutex
	killed      = map[string]bool{}
	falseDeaths atomic.Int64
)

func (e events) NotifyJoin(n *memberlist.Node) {
	e.v.mu.Lock()
	e.v.alive[n.Name] = true
	e.v.mu.Unlock()
}
func (e events) NotifyLeave(n *memberlist.Node) {
	e.v.mu.Lock()
	delete(e.v.alive, n.Name)
	e.v.mu.Unlock()
	killedMu.Lock()
	if !killed[n.Name] {
		falseDeaths.Add(1)
	}
	killedMu.Unlock()
}
func (e events) NotifyUpdate(*memberlist.Node) {}

type member struct {
	ml *memberlist.Memberlist
	v  *view
}

func (m member) lists(name string) bool {
	m.v.mu.Lock()
	defer m.v.mu.Unlock()
	return m.v.alive[name]
}

func suspicionMult(int) int { return 2 }

func start(name string, key []byte, n int) member {
	quiet := log.New(io.Discard, "", 0)
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{"127.0.0.1"}, BindPort: 0, Logger: quiet})
	if err != nil {
		fail(err)
	}
	t := &countingTransport{NetTransport: nt, streams: make(chan net.Conn)}
	go func() {
		for c := range nt.StreamCh() {
			t.streams <- countingConn{c}
		}
	}()
	v := &view{alive: map[string]bool{}}
	c := memberlist.DefaultWANConfig()
	c.Name = name
	c.Transport = t
	c.BindAddr = "127.0.0.1"
	c.BindPort = nt.GetAutoBindPort()
	c.AdvertisePort = c.BindPort
	c.Logger = quiet
	c.SecretKey = key
	c.ProbeInterval = probeInterval
	c.ProbeTimeout = 300 * time.Millisecond
	c.GossipInterval = 50 * time.Millisecond
	c.GossipNodes = 4
	c.IndirectChecks = 3
	c.PushPullInterval = 3 * time.Second
	c.GossipToTheDeadTime = 3 * time.Second
	c.TCPTimeout = time.Second
	c.SuspicionMult = suspicionMult(n)
	c.SuspicionMaxTimeoutMult = 3
	c.Events = events{v}
	ml, err := memberlist.Create(c)
	if err != nil {
		fail(err)
	}
	return member{ml, v}
}

func until(what string, limit time.Duration, check func() bool) time.Duration {
	t0 := time.Now()
	for !check() {
		if time.Since(t0) > limit {
			fail(fmt.Errorf("timed out after %s waiting for %s", limit, what))
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(t0)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "memberlist bench:", err)
	os.Exit(1)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

type row struct {
	N                    int       `json:"n"`
	ConvergeMs           float64   `json:"convergeMs"`
	JoinMs               []float64 `json:"joinMs"`
	DeathMs              []float64 `json:"deathMs"`
	FalseDeaths          int64     `json:"falseDeaths"`
	BytesPerMemberPerSec float64   `json:"bytesPerMemberPerSec"`
	SuspicionMult        int       `json:"suspicionMult"`
	SuspicionTimeoutMs   float64   `json:"suspicionTimeoutMs"`
}

func run(n int) row {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		fail(err)
	}
	killedMu.Lock()
	killed = map[string]bool{}
	killedMu.Unlock()
	falseDeaths.Store(0)
	var members []member
	for i := 0; i < n; i++ {
		members = append(members, start(fmt.Sprintf("site-%d", i), key, n))
	}
	seed := members[0].ml.LocalNode().Address()
	tc := time.Now()
	var wg sync.WaitGroup
	for _, m := range members[1:] {
		wg.Add(1)
		go func(m member) {
			defer wg.Done()
			if _, err := m.ml.Join([]string{seed}); err != nil {
				fail(err)
			}
		}(m)
	}
	wg.Wait()
	until("the grid to converge", 60*time.Second, func() bool {
		for _, m := range members {
			if m.ml.NumMembers() != n {
				return false
			}
		}
		return true
	})
	r := row{N: n, ConvergeMs: ms(time.Since(tc)), SuspicionMult: suspicionMult(n)}
	r.SuspicionTimeoutMs = float64(r.SuspicionMult) * math.Max(1, math.Log10(float64(n))) * 500

	// As ours: two push-pull periods (memberlist's pushPullScale of 3 s) before the quiet window.
	pushPull := 3 * time.Second
	if n > 32 {
		pushPull *= time.Duration(math.Ceil(math.Log2(float64(n))-math.Log2(32)) + 1)
	}
	time.Sleep(2 * pushPull)
	b0, w0 := sent.Load(), time.Now()
	time.Sleep(steadyWindow)
	r.BytesPerMemberPerSec = float64(sent.Load()-b0) / float64(n) / time.Since(w0).Seconds()

	for trial := 0; trial < trials; trial++ {
		newcomer := start(fmt.Sprintf("site-%d", n+trial), key, n)
		members = append(members, newcomer)
		name := newcomer.ml.LocalNode().Name
		tj := time.Now()
		if _, err := newcomer.ml.Join([]string{members[trial].ml.LocalNode().Address()}); err != nil {
			fail(err)
		}
		until("the new member to be known by all", 60*time.Second, func() bool {
			for _, m := range members {
				if m.ml != newcomer.ml && !m.lists(name) {
					return false
				}
			}
			return true
		})
		r.JoinMs = append(r.JoinMs, ms(time.Since(tj)))
		until("everyone to be known by the new member", 60*time.Second, func() bool { return newcomer.ml.NumMembers() == len(members) })

		i := 1 + (len(members)-2)*(trial+1)/(trials+1)
		victim := members[i]
		members = append(members[:i], members[i+1:]...)
		vname := victim.ml.LocalNode().Name
		killedMu.Lock()
		killed[vname] = true
		killedMu.Unlock()
		td := time.Now()
		if err := victim.ml.Shutdown(); err != nil {
			fail(err)
		}
		until("the death to be known by all", 60*time.Second, func() bool {
			for _, m := range members {
				if m.lists(vname) {
					return false
				}
			}
			return true
		})
		r.DeathMs = append(r.DeathMs, ms(time.Since(td)))
	}
	r.FalseDeaths = falseDeaths.Load()
	for _, m := range members {
		_ = m.ml.Shutdown()
	}
	return r
}

func main() {
	if len(os.Args) < 2 || os.Args[1] == "--help" {
		fmt.Println("usage: go run . N...   (memberlist side of npm run bench:gossip)")
		os.Exit(0)
	}
	for _, a := range os.Args[1:] {
		n, err := strconv.Atoi(a)
		if err != nil || n < 2 {
			fmt.Fprintf(os.Stderr, "memberlist bench: %q is not a size of at least 2\n", a)
			os.Exit(2)
		}
		out, _ := json.Marshal(run(n))
		fmt.Println(string(out))
	}
}
