// The ping-pong relay server on gorilla/websocket: net/http hands every request to an Upgrader (as gorilla's
// examples do), and each connection's handler goroutine reads its messages and relays them to the other members
// of its room. Usage: go_ws_server --host H --port P [--loop auto] [--compression default|off|on]
// [--tls-cert F --tls-key F] [--workers N]
// With --workers N the Go scheduler runs goroutines on N threads at once (GOMAXPROCS = N, what Go's runtime takes by
// itself from a process given N CPUs); without it, Go's default: the CPUs of its affinity mask. One process, the rooms
// in its memory: a room's members, read by each relay without a lock, are safe across threads (see room).
package main

import (
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"pingpong/native/go/internal/buildinfo"
)

const (
	writeWait = 10 * time.Second // as in gorilla's chat example: a member that reads nothing for this long is dropped
	readLimit = 64 << 20         // gorilla has no limit by default; the C floor's largest frame
)

// A member's writes come from the readers of the other members: gorilla allows one writer at a time.
type member struct {
	conn *websocket.Conn
	mu   sync.Mutex
}

func (m *member) send(messageType int, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conn == nil {
		return // its handshake failed: it never joined for real
	}
	m.conn.SetWriteDeadline(time.Now().Add(writeWait))
	if err := m.conn.WriteMessage(messageType, data); err != nil {
		m.conn.Close() // its own reader then fails and leaves the room
	}
}

// The members of a room: joins and leaves (under roomsMu) store a new slice, so a relay reads one without a lock.
type room struct{ members atomic.Pointer[[]*member] }

var (
	roomsMu sync.Mutex
	rooms   = map[string]*room{}
)

func join(name string, m *member) *room {
	roomsMu.Lock()
	defer roomsMu.Unlock()
	r := rooms[name]
	if r == nil {
		r = &room{}
		r.members.Store(&[]*member{})
		rooms[name] = r
	}
	members := append(append([]*member{}, *r.members.Load()...), m)
	r.members.Store(&members)
	return r
}

func leave(name string, r *room, m *member) {
	roomsMu.Lock()
	defer roomsMu.Unlock()
	var members []*member
	for _, other := range *r.members.Load() {
		if other != m {
			members = append(members, other)
		}
	}
	r.members.Store(&members)
	if len(members) == 0 {
		delete(rooms, name)
	}
}

func serve(upgrader *websocket.Upgrader) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name, _, _ := strings.Cut(r.RequestURI, "?")
		if name == "" {
			name = "/"
		}
		// The member joins its room before Upgrade answers the handshake, its lock held until its connection is
		// there: a message relayed to it in between waits for it, so the client's first message after the
		// handshake can never find the room without it.
		m := &member{}
		m.mu.Lock()
		joined := join(name, m)
		defer leave(name, joined, m)
		conn, err := upgrader.Upgrade(w, r, nil)
		m.conn = conn // nil when the handshake failed
		m.mu.Unlock()
		if err != nil {
			return // Upgrade has answered with an HTTP error
		}
		defer conn.Close()
		conn.SetReadLimit(readLimit)
		for {
			messageType, data, err := conn.ReadMessage()
			if err != nil {
				return
			}
			for _, other := range *joined.members.Load() {
				if other != m {
					other.send(messageType, data)
				}
			}
		}
	}
}

// flagError says what the flag package found wrong, with the contract's double dashes.
func flagError(err error) string {
	if name, found := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); found {
		return "unknown option --" + name
	}
	return strings.NewReplacer("flag -", "flag --", ": -", ": --").Replace(err.Error())
}

// flagGiven says whether the command line set the flag (a value of 0 then is a mistake, not the default).
func flagGiven(flags *flag.FlagSet, name string) bool {
	given := false
	flags.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "go_ws_server: "+format+"\n", args...)
	os.Exit(code)
}

// writeInfo writes the server report to PINGPONG_INFO_FILE, if set, atomically (a temporary file renamed).
func writeInfo(compression string, compress, tls bool, workers int) {
	path := os.Getenv("PINGPONG_INFO_FILE")
	if path == "" {
		return
	}
	var asked any // --workers N as given; null without it
	if workers > 0 {
		asked = workers
	}
	info, _ := json.Marshal(map[string]any{
		"format_version": 1, "role": "server", "pid": os.Getpid(), "implementation": "go-gorilla",
		"runtime":        map[string]string{"name": "go", "version": runtime.Version()},
		"libraries":      map[string]string{"gorilla/websocket": buildinfo.GorillaVersion()},
		"loop_requested": "auto", "loop": "go-netpoll",
		"settings": map[string]any{"compression": compression, "compression_effective": compress, "tls": tls,
			"workers": asked, "gomaxprocs": runtime.GOMAXPROCS(0)},
	})
	temporary := path + "." + strconv.Itoa(os.Getpid()) + ".tmp"
	if os.WriteFile(temporary, info, 0o644) == nil {
		os.Rename(temporary, path)
	}
}

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	flags := flag.NewFlagSet("go_ws_server", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	host := flags.String("host", "127.0.0.1", "")
	port := flags.Int("port", -1, "")
	loop := flags.String("loop", "auto", "")
	compression := flags.String("compression", "default", "")
	certFile := flags.String("tls-cert", "", "")
	keyFile := flags.String("tls-key", "", "")
	workers := flags.Int("workers", 0, "")
	usage := "usage: go_ws_server --host H --port P [--loop auto] [--compression default|off|on] " +
		"[--tls-cert FILE --tls-key FILE] [--workers N]"
	if err := flags.Parse(os.Args[1:]); err != nil {
		fail(2, "%s; %s", flagError(err), usage)
	}
	switch {
	case flags.NArg() > 0:
		fail(2, "unexpected argument %q; %s", flags.Arg(0), usage)
	case *port < 0 || *port > 65535:
		fail(2, "--port must be an integer 0-65535; %s", usage)
	case *loop != "auto":
		fail(2, "--loop %s is not available here (use auto: Go's netpoller)", *loop)
	case *compression != "default" && *compression != "off" && *compression != "on":
		fail(2, "--compression must be default, off or on")
	case (*certFile == "") != (*keyFile == ""):
		fail(2, "--tls-cert and --tls-key go together")
	case *workers < 0 || flagGiven(flags, "workers") && *workers < 1:
		fail(2, "--workers must be an integer of at least 1; %s", usage)
	}
	if *workers > 0 {
		runtime.GOMAXPROCS(*workers)
	}

	// gorilla's Upgrader refuses permessage-deflate unless EnableCompression is set: default = off.
	compress := *compression == "on"
	upgrader := &websocket.Upgrader{EnableCompression: compress, CheckOrigin: func(*http.Request) bool { return true }}
	server := &http.Server{Handler: serve(upgrader)}
	if *certFile != "" {
		certificate, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			fail(1, "cannot load the TLS certificate and key: %v", err)
		}
		server.TLSConfig = &tls.Config{Certificates: []tls.Certificate{certificate}}
		// HTTP/1.1 only: gorilla upgrades HTTP/1.1 requests, not HTTP/2 streams.
		server.Protocols = new(http.Protocols)
		server.Protocols.SetHTTP1(true)
	}
	listener, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		fail(1, "%v", err)
	}
	go func() {
		if *certFile != "" {
			fail(1, "%v", server.ServeTLS(listener, "", ""))
		}
		fail(1, "%v", server.Serve(listener))
	}()
	writeInfo(*compression, compress, *certFile != "", *workers)
	fmt.Fprintf(os.Stderr, "go-gorilla server listening on %s\n", listener.Addr())

	<-stop
	os.Exit(0) // the kernel closes the listener and every connection
}
