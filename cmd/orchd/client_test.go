package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// TestAPIClient_BoundsACall: a daemon that takes the connection and never
// answers ends the call after the client's timeout, with an error saying
// so, instead of hanging the command.
func TestAPIClient_BoundsACall(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c // held open, never answered
		}
	}()
	c := newAPIClient("http://" + ln.Addr().String())
	c.timeout = 200 * time.Millisecond
	start := time.Now()
	err = c.do(context.Background(), "GET", "/v1/agents", nil, nil)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "did not answer within 200ms") {
		t.Fatalf("do = %v, want the timeout said", err)
	}
	if took > 5*time.Second {
		t.Errorf("do took %s, want about its 200ms timeout", took)
	}
	select {
	case conn := <-accepted:
		conn.Close()
	case <-time.After(5 * time.Second):
		t.Error("the daemon never saw the connection")
	}
}
