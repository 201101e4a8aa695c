// Package natstest starts real NATS servers with JetStream for tests: one
// embedded in the test process, or a cluster of several on 127.0.0.1.
// Nothing is mocked; every server stores on disk under the test's
// temporary directory and is shut down when the test ends.
package natstest

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/orchd/orchd/internal/testport"
)

// readyWithin bounds how long a server may take to accept connections,
// and a cluster to elect its JetStream meta leader: on 2 cores shared by
// a whole -race test run that took over 10s once.
const readyWithin = 30 * time.Second

// Server starts an in-process JetStream server storing under dir (a new
// temporary directory when dir is ""), with no network port.
func Server(t testing.TB, dir string) *server.Server {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	s := start(t, &server.Options{ServerName: "natstest", JetStream: true, StoreDir: dir,
		DontListen: true, NoSigs: true, NoLog: true, JetStreamMaxStore: 1 << 30, JetStreamMaxMemory: 64 << 20})
	return s
}

// Listening starts a JetStream server storing under a new temporary
// directory with a client port on 127.0.0.1, for several clients to
// connect to as separate processes would (its URL is s.ClientURL()).
func Listening(t testing.TB) *server.Server {
	t.Helper()
	return start(t, &server.Options{ServerName: "natstest", JetStream: true, StoreDir: t.TempDir(),
		Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true, JetStreamMaxStore: 1 << 30, JetStreamMaxMemory: 64 << 20})
}

// JetStream connects to s in process and returns the JetStream client;
// the connection closes when the test ends.
func JetStream(t testing.TB, s *server.Server) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect("", nats.InProcessServer(s))
	if err != nil {
		t.Fatalf("connect to %s: %v", s.Name(), err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return js
}

// Node is a JetStream server with a client port on 127.0.0.1 that a test
// stops and starts again on the same port and store, as an operator
// restarts NATS: its clients reconnect to it.
type Node struct {
	// Server is the running server; a stopped node's stays until Start.
	Server *server.Server
	t      testing.TB
	opts   *server.Options
}

// NewNode starts a node storing under a new temporary directory.
func NewNode(t testing.TB) *Node {
	t.Helper()
	n := &Node{t: t, opts: &server.Options{ServerName: "natstest", JetStream: true, StoreDir: t.TempDir(),
		Host: "127.0.0.1", Port: testport.Free(t, 1)[0], NoSigs: true, NoLog: true, JetStreamMaxStore: 1 << 30, JetStreamMaxMemory: 64 << 20}}
	n.Start()
	return n
}

// URL is the node's client URL.
func (n *Node) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.opts.Port) }

// JetStream connects to the node over its client port, reconnecting
// for ever, 50 ms apart, across Stop and Start, and returns the
// JetStream client; the connection closes when the test ends.
func (n *Node) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(n.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect to %s: %v", n.URL(), err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return js
}

// Stop shuts the node down.
func (n *Node) Stop() {
	n.Server.Shutdown()
	n.Server.WaitForShutdown()
}

// Start starts the node, again after Stop, on its own store and port.
func (n *Node) Start() {
	n.t.Helper()
	n.Server = start(n.t, n.opts)
}

// Cluster is a NATS cluster of JetStream servers on 127.0.0.1.
type Cluster struct {
	// Servers are the nodes; a stopped node's entry stays until Restart.
	Servers []*server.Server
	t       testing.TB
	opts    []*server.Options
}

// NewCluster starts n clustered nodes on 127.0.0.1 and waits until they
// have a JetStream meta leader. Cluster ports are reserved first, since a
// node given port -1 is not reachable by its peers' routes in time.
func NewCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	ports := testport.Free(t, 2*n)
	var routes []*url.URL
	for i := range n {
		routes = append(routes, &url.URL{Scheme: "nats", Host: fmt.Sprintf("127.0.0.1:%d", ports[n+i])})
	}
	c := &Cluster{t: t}
	for i := range n {
		c.opts = append(c.opts, &server.Options{
			ServerName: fmt.Sprintf("node-%d", i), Host: "127.0.0.1", Port: ports[i],
			JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
			JetStreamMaxStore: 1 << 30, JetStreamMaxMemory: 64 << 20,
			Cluster: server.ClusterOpts{Name: "natstest", Host: "127.0.0.1", Port: ports[n+i]},
			Routes:  routes,
		})
	}
	c.Servers = make([]*server.Server, n)
	done := make(chan int, n)
	for i := range n {
		go func() { c.Servers[i] = start(t, c.opts[i]); done <- i }()
	}
	for range n {
		<-done
	}
	c.WaitForLeader()
	return c
}

// URLs returns the client URLs of every node, comma-separated, as
// nats.Connect takes them.
func (c *Cluster) URLs() string {
	var urls []string
	for _, o := range c.opts {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", o.Port))
	}
	return strings.Join(urls, ",")
}

// Stop shuts node i down as an operator would: the raft groups it leads
// first hand their leadership to a current follower, when one is. A crash
// hands nothing over; its survivors elect a leader after NATS's election
// timeout, 4–9 s.
func (c *Cluster) Stop(i int) {
	c.Servers[i].Shutdown()
	c.Servers[i].WaitForShutdown()
}

// Restart starts node i again on its own store directory and ports.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.Servers[i] = start(c.t, c.opts[i])
}

// WaitForLeader waits until every running node sees a current JetStream
// meta layer with a leader among them, and the leader counts every running
// node as an online peer: before that, a stream or bucket with a replica
// per node is refused ("no suitable peers for placement").
func (c *Cluster) WaitForLeader() {
	c.t.Helper()
	deadline := time.Now().Add(readyWithin)
	for time.Now().Before(deadline) {
		leader, current, running, online := false, true, 0, 0
		for _, s := range c.Servers {
			if s == nil || !s.Running() {
				continue
			}
			running++
			current = current && s.JetStreamIsCurrent()
			if s.JetStreamIsLeader() {
				leader, online = true, len(s.JetStreamClusterPeers())
			}
		}
		if leader && current && online >= running {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("no JetStream meta leader with every node online within %s", readyWithin)
}

// start starts a server and waits until it accepts connections; it is
// shut down when the test ends.
func start(t testing.TB, o *server.Options) *server.Server {
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatalf("nats server %s: %v", o.ServerName, err)
	}
	go s.Start()
	if !s.ReadyForConnections(readyWithin) {
		s.Shutdown()
		t.Fatalf("nats server %s not ready within %s", o.ServerName, readyWithin)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}
