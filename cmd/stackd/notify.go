package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// notifier speaks systemd's notify protocol (sd_notify) on the datagram
// socket named by $NOTIFY_SOCKET. Without that variable every call does
// nothing, so stackd runs the same outside systemd.
type notifier struct {
	addr string
}

func newNotifier() *notifier {
	addr := os.Getenv("NOTIFY_SOCKET")
	if strings.HasPrefix(addr, "@") { // an abstract socket
		addr = "\x00" + addr[1:]
	}
	return &notifier{addr: addr}
}

// send sends one message of newline-separated KEY=VALUE assignments.
func (n *notifier) send(state string) error {
	if n.addr == "" {
		return nil
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: n.addr, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("notify systemd: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("notify systemd: %w", err)
	}
	return nil
}

// reloading is the message that starts a reload: systemd wants the
// monotonic clock with it.
func reloading() string {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return fmt.Sprintf("RELOADING=1\nMONOTONIC_USEC=%d", ts.Nano()/1000)
}

// watchdog pings systemd at half the interval of WatchdogSec= until ctx
// ends; without a watchdog it returns at once.
func (n *notifier) watchdog(ctx context.Context) {
	usec, err := strconv.ParseInt(os.Getenv("WATCHDOG_USEC"), 10, 64)
	if err != nil || usec <= 0 || n.addr == "" {
		return
	}
	if pid := os.Getenv("WATCHDOG_PID"); pid != "" && pid != strconv.Itoa(os.Getpid()) {
		return
	}
	tick := time.NewTicker(time.Duration(usec) * time.Microsecond / 2)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			_ = n.send("WATCHDOG=1")
		}
	}
}
