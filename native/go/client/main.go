// The ping-pong client driver on gorilla/websocket's Dialer: connections A and B in one room, A sends the ping, B
// checks it and sends the pong, A checks that; the same timing, events and report as native/raw_tcp_client.c.
// Latencies are reported as [value_ns, count] pairs rounded to 11 significant bits (HdrHistogram's precision at 3
// significant digits). It runs the pingpong workload: one pair, or --pairs N at once, pair i in room ROOM-p<i>, each
// on goroutines of its own (Go's runtime spreads them over its GOMAXPROCS threads). SIGCONTs are counted, and a
// roundtrip a pause touched is not timed (pauseFilter, the rule of native/pauses.h).
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/bits"
	"net"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"pingpong/native/go/internal/buildinfo"
)

const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

var utf8Cycle = []string{"a", "\u00e9", "\u20ac", "\U0001f600"}

// makePayload returns the ping (which=0) or pong (which=1) of exactly size bytes; see pingpong/kit/payloads.py.
func makePayload(kind string, size, which int) []byte {
	out := make([]byte, 0, size)
	switch kind {
	case "text-ascii":
		for i := 0; i < size; i++ {
			out = append(out, alphabet[(i+which)%36])
		}
	case "binary":
		for i := 0; i < size; i++ {
			out = append(out, byte(i*31+7+which*101))
		}
	default: // text-utf8: 1-4 byte characters in turn, ASCII where the next one does not fit
		for index := which; len(out) < size; index++ {
			c := utf8Cycle[index%4]
			if len(out)+len(c) > size {
				c = string(alphabet[(index+which)%36])
			}
			out = append(out, c...)
		}
	}
	return out
}

type connection struct {
	Name         string  `json:"name"`
	Extensions   *string `json:"extensions"`
	Subprotocol  *string `json:"subprotocol"`
	Family       string  `json:"family"`
	LocalAddress string  `json:"local_address"`
	PeerAddress  string  `json:"peer_address"`
	TCPNoDelay   bool    `json:"tcp_nodelay"`
}

// The pauses of the measured window: SIGCONTs counted in it, and latencies not recorded because of them.
type pauses struct {
	Continued      uint64 `json:"continued"`
	LatencyDropped int    `json:"latency_dropped"`
}

type latency struct {
	Unit         string     `json:"unit"`
	Recorded     bool       `json:"recorded"`
	HdrHistogram *string    `json:"hdr_histogram"`
	ValueCounts  [][2]int64 `json:"value_counts,omitempty"`
}

// What a successful run adds to the report (a nil *results leaves these fields out).
type results struct {
	Warmup         map[string]any     `json:"warmup"`
	Roundtrips     int                `json:"roundtrips"`
	ElapsedS       float64            `json:"elapsed_s"`
	RoundtripsPerS float64            `json:"roundtrips_per_s"`
	CPU            map[string]float64 `json:"cpu"`
	Pauses         pauses             `json:"pauses"`
	Latency        latency            `json:"latency"`
	Connections    []connection       `json:"connections"`
	// With --pairs N > 1: each pair's roundtrips, and its latencies as value counts (the orchestrator encodes each
	// as the Python and Node.js drivers' per_pair_hdr_histograms).
	PerPairRoundtrips  []int        `json:"per_pair_roundtrips,omitempty"`
	PerPairValueCounts [][][2]int64 `json:"per_pair_value_counts,omitempty"`
}

type report struct {
	FormatVersion  int               `json:"format_version"`
	Role           string            `json:"role"`
	Implementation string            `json:"implementation"`
	Runtime        map[string]string `json:"runtime"`
	Libraries      map[string]string `json:"libraries"`
	Loop           string            `json:"loop"`
	Settings       map[string]any    `json:"settings"`
	Payload        map[string]any    `json:"payload"`
	Workload       string            `json:"workload"`
	Pairs          int               `json:"pairs"`
	Error          *string           `json:"error"`
	Errors         int               `json:"errors"`
	*results
}

type options struct {
	url                     string
	duration, warmup, stall time.Duration
	kind                    string
	size, pairs             int
	record                  bool
	dialer                  websocket.Dialer
}

// emit writes one line to the orchestrator's events pipe (PINGPONG_EVENTS_FD); after a failed write, no more.
var eventsFD = -1

func emit(line string) {
	if eventsFD >= 0 {
		if _, err := syscall.Write(eventsFD, []byte(line+"\n")); err != nil {
			eventsFD = -1
		}
	}
}

// readGo blocks until a line arrives on fd and closes it; true when the line is "go" (false at end of file).
func readGo(fd int) bool {
	file := os.NewFile(uintptr(fd), "go")
	defer file.Close()
	var line []byte
	chunk := make([]byte, 64)
	for !bytes.HasSuffix(line, []byte("\n")) {
		n, err := file.Read(chunk)
		line = append(line, chunk[:n]...)
		if err != nil {
			break
		}
	}
	return strings.TrimSpace(string(line)) == "go"
}

func envFD(name string) (int, bool) {
	fd, err := strconv.Atoi(os.Getenv(name))
	return fd, err == nil
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// tcpNoDelay reads TCP_NODELAY back from the socket under the (TLS) connection.
func tcpNoDelay(c net.Conn) bool {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	value := 0
	if s, ok := c.(syscall.Conn); ok {
		if raw, err := s.SyscallConn(); err == nil {
			raw.Control(func(fd uintptr) {
				value, _ = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_NODELAY)
			})
		}
	}
	return value != 0
}

func open(o *options, roomURL, name string) (*websocket.Conn, connection, error) {
	conn, response, err := o.dialer.Dial(roomURL, nil)
	if err != nil {
		if response != nil {
			err = fmt.Errorf("%v (HTTP %s)", err, response.Status)
		}
		return nil, connection{}, fmt.Errorf("connection %s: %v", name, err)
	}
	family := "ipv6"
	if conn.LocalAddr().(*net.TCPAddr).IP.To4() != nil {
		family = "ipv4"
	}
	return conn, connection{Name: name, Extensions: nonEmpty(response.Header.Get("Sec-WebSocket-Extensions")),
		Subprotocol: nonEmpty(conn.Subprotocol()), Family: family, LocalAddress: conn.LocalAddr().String(),
		PeerAddress: conn.RemoteAddr().String(), TCPNoDelay: tcpNoDelay(conn.NetConn())}, nil
}

func closeConn(conn *websocket.Conn) {
	conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""),
		time.Now().Add(time.Second))
	conn.Close()
}

func describe(messageType int, data []byte) string {
	kind := "text"
	if messageType == websocket.BinaryMessage {
		kind = "binary"
	}
	return fmt.Sprintf("%s of %d bytes %q", kind, len(data), data[:min(len(data), 24)])
}

// expect reads one message on conn and checks its type and bytes.
func expect(conn *websocket.Conn, name string, messageType int, want []byte) error {
	got, data, err := conn.ReadMessage()
	if err != nil {
		return fmt.Errorf("connection %s: %v", name, err)
	}
	if got != messageType || !bytes.Equal(data, want) {
		return fmt.Errorf("payload mismatch: connection %s expected %s, received %s", name,
			describe(messageType, want), describe(got, data))
	}
	return nil
}

func cpuSeconds() (user, system float64) {
	var usage syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &usage)
	return float64(usage.Utime.Nano()) / 1e9, float64(usage.Stime.Nano()) / 1e9
}

// valueCounts rounds latencies to 11 significant bits and counts each value, in increasing order.
func valueCounts(latencies []int64) [][2]int64 {
	for i, value := range latencies {
		shift := max(bits.Len64(uint64(value)|1)-11, 0)
		latencies[i] = value >> shift << shift
	}
	slices.Sort(latencies)
	counts := [][2]int64{}
	for _, value := range latencies {
		if n := len(counts); n > 0 && counts[n-1][0] == value {
			counts[n-1][1]++
		} else {
			counts = append(counts, [2]int64{value, 1})
		}
	}
	return counts
}

// pairURLs is the room URL of each pair: the given room for one pair, ROOM-p0 .. ROOM-p<N-1> for N pairs, each with
// the URL's query string (pingpong/kit/driver/core.py pair_urls).
func pairURLs(rawURL string, pairs int) []string {
	if pairs == 1 {
		return []string{rawURL}
	}
	base, query, hasQuery := strings.Cut(rawURL, "?")
	urls := make([]string, pairs)
	for i := range urls {
		urls[i] = fmt.Sprintf("%s-p%d", base, i)
		if hasQuery {
			urls[i] += "?" + query
		}
	}
	return urls
}

// continued counts the SIGCONTs this process received: each ends a pause (the measured cell kept off its CPU while
// the host sentinel is timed there, then sent a SIGCONT). A goroutine counts them, so a count can come several
// roundtrips after the SIGCONT: pauseFilter holds heldRoundtrips for it.
var continued atomic.Uint64

func countPauses() {
	signals := make(chan os.Signal, 64)
	signal.Notify(signals, syscall.SIGCONT)
	go func() {
		for range signals {
			continued.Add(1)
		}
	}()
}

// heldRoundtrips is how many roundtrips after a pause its count may come: the count takes three goroutine hops (the
// runtime's signal loop, os/signal's, then countPauses'), each at a scheduling point, and each hop's thread may wait
// for the measured CPU. A paused roundtrip of 50 ms was recorded with a wait of one (CI, 2026-11-27), one of 202 ms
// with a wait of three (a CI run by hand, 2026-11-29), and under two busy loops with a wait of six (by hand).
const heldRoundtrips = 32

// pauseFilter keeps one pair's latencies through its window. The rule of native/pauses.h needs the count at each
// roundtrip's end, which a goroutine's count is not. So each roundtrip is held until heldRoundtrips more have ended,
// and when the count has moved by m at a roundtrip's end, the m slowest held roundtrips that no earlier count took
// are dropped: a roundtrip a pause stopped lasted at least the pause (the sentinel's slice, about 1 ms, against
// 0.05-0.3 ms for a roundtrip here), so it is the slowest since the last pause unless a pause came more than
// heldRoundtrips late. One latency per pause is left out, not a pause's neighbours. Every roundtrip still counts.
type pauseFilter struct {
	last    uint64     // the count read at the last roundtrip's end
	held    []heldTrip // the roundtrips not yet recorded, oldest first
	dropped int        // latencies not recorded
}

// heldTrip is a held roundtrip's latency, and whether a count took it as paused.
type heldTrip struct {
	latency int64
	paused  bool
}

// next takes the latency of the roundtrip that just ended and the count read at its end; it takes the slowest held
// roundtrips as paused for each SIGCONT counted since the last, and records the oldest beyond heldRoundtrips.
func (f *pauseFilter) next(latency int64, seen uint64, latencies *[]int64) {
	f.held = append(f.held, heldTrip{latency: latency})
	for ; f.last < seen; f.last++ {
		slowest := -1
		for i, trip := range f.held {
			if !trip.paused && (slowest < 0 || trip.latency > f.held[slowest].latency) {
				slowest = i
			}
		}
		if slowest >= 0 {
			f.held[slowest].paused = true
		}
	}
	if len(f.held) > heldRoundtrips {
		f.settle(f.held[0], latencies)
		f.held = f.held[1:]
	}
}

// settle records a held roundtrip unless a count took it as paused.
func (f *pauseFilter) settle(trip heldTrip, latencies *[]int64) {
	if trip.paused {
		f.dropped++
	} else {
		*latencies = append(*latencies, trip.latency)
	}
}

// close ends the window: each roundtrip still held is recorded unless a count took it as paused.
func (f *pauseFilter) close(latencies *[]int64) {
	for _, trip := range f.held {
		f.settle(trip, latencies)
	}
	f.held = nil
}

// pair is one ping-pong pair, A and B in one room, with its own stall watchdog and its own counts.
type pair struct {
	label                        string // "" with one pair, its index with --pairs N
	a, b                         *websocket.Conn
	messageType                  int
	ping, pong                   []byte
	stall                        time.Duration
	stalled                      atomic.Bool
	watchdog                     *time.Timer
	warmupRoundtrips, roundtrips int
	latencies                    []int64
	pauses                       pauseFilter
	end                          time.Time
}

// roundtrip is one verified ping and pong; no roundtrip for p.stall closes both connections, which ends the blocked
// read or write and is reported as a stall.
func (p *pair) roundtrip() error {
	err := p.a.WriteMessage(p.messageType, p.ping)
	if err == nil {
		err = expect(p.b, "B"+p.label, p.messageType, p.ping)
	}
	if err == nil {
		err = p.b.WriteMessage(p.messageType, p.pong)
	}
	if err == nil {
		err = expect(p.a, "A"+p.label, p.messageType, p.pong)
	}
	if err != nil && p.stalled.Load() {
		if p.label != "" {
			return fmt.Errorf("stall: no roundtrip completed for %g s on pair %s", p.stall.Seconds(), p.label)
		}
		return fmt.Errorf("stall: no roundtrip completed for %g s", p.stall.Seconds())
	}
	p.watchdog.Reset(p.stall)
	return err
}

func (p *pair) warmUp(deadline time.Time) error {
	for time.Now().Before(deadline) {
		if err := p.roundtrip(); err != nil {
			return err
		}
		p.warmupRoundtrips++
	}
	return nil
}

// window runs roundtrips until the first one that completes at or after the deadline.
func (p *pair) window(start, deadline time.Time, record bool) error {
	p.pauses = pauseFilter{last: continued.Load()} // c_0, before the first roundtrip's start
	for p.end = start; p.end.Before(deadline); {
		sent := time.Now()
		if err := p.roundtrip(); err != nil {
			return err
		}
		seen := continued.Load()
		p.end = time.Now()
		if record {
			p.pauses.next(int64(p.end.Sub(sent)), seen, &p.latencies)
		}
		p.roundtrips++
	}
	if record {
		p.pauses.close(&p.latencies)
	}
	return nil
}

// together runs step on every pair at once, a goroutine each, and returns the first failure; that failure closes
// every pair's connections, so the others' blocked reads end too (their errors, which it caused, are not reported).
func together(pairs []*pair, step func(*pair) error) error {
	var group sync.WaitGroup
	var once sync.Once
	var first error
	for _, p := range pairs {
		group.Add(1)
		go func() {
			defer group.Done()
			if err := step(p); err != nil {
				once.Do(func() {
					first = err
					for _, other := range pairs {
						other.a.Close()
						other.b.Close()
					}
				})
			}
		}()
	}
	group.Wait()
	return first
}

func run(o *options) (*results, error) {
	messageType := websocket.TextMessage
	if o.kind == "binary" {
		messageType = websocket.BinaryMessage
	}
	ping, pong := makePayload(o.kind, o.size, 0), makePayload(o.kind, o.size, 1)
	var pairs []*pair
	var details []connection
	for i, roomURL := range pairURLs(o.url, o.pairs) {
		p := &pair{messageType: messageType, ping: ping, pong: pong, stall: o.stall}
		if o.record {
			p.latencies = make([]int64, 0, 1<<16)
		}
		if o.pairs > 1 {
			p.label = strconv.Itoa(i)
		}
		var detailsA, detailsB connection
		var err error
		if p.a, detailsA, err = open(o, roomURL, "A"+p.label); err != nil {
			return nil, err
		}
		defer closeConn(p.a)
		if p.b, detailsB, err = open(o, roomURL, "B"+p.label); err != nil {
			return nil, err
		}
		defer closeConn(p.b)
		pairs, details = append(pairs, p), append(details, detailsA, detailsB)
	}
	emit("ready")
	if fd, ok := envFD("PINGPONG_GO_FD"); ok && !readGo(fd) {
		return nil, errors.New("start barrier: the orchestrator closed it without a go (another client process " +
			"failed or did not get ready)")
	}
	for _, p := range pairs {
		p.watchdog = time.AfterFunc(o.stall, func() { p.stalled.Store(true); p.a.Close(); p.b.Close() })
		defer p.watchdog.Stop()
	}

	// One pair runs on this goroutine, as it always has; N pairs warm up together, then share one window.
	warmupStart := time.Now()
	warmupDeadline := warmupStart.Add(o.warmup)
	var start time.Time
	var userStart, systemStart float64
	var continuedAtStart uint64
	if len(pairs) == 1 {
		if err := pairs[0].warmUp(warmupDeadline); err != nil {
			return nil, err
		}
		continuedAtStart = continued.Load() // before the event, on which the orchestrator may pause the cell
		emit("window-start")
		userStart, systemStart = cpuSeconds()
		start = time.Now()
		if err := pairs[0].window(start, start.Add(o.duration), o.record); err != nil {
			return nil, err
		}
	} else {
		err := together(pairs, func(p *pair) error {
			err := p.warmUp(warmupDeadline)
			p.watchdog.Stop() // waiting for the slowest pair's warmup is not a stall
			return err
		})
		if err != nil {
			return nil, err
		}
		continuedAtStart = continued.Load() // before the event, on which the orchestrator may pause the cell
		emit("window-start")
		userStart, systemStart = cpuSeconds()
		start = time.Now()
		deadline := start.Add(o.duration)
		err = together(pairs, func(p *pair) error {
			p.watchdog.Reset(o.stall)
			return p.window(start, deadline, o.record)
		})
		if err != nil {
			return nil, err
		}
	}
	continuedInWindow := continued.Load() - continuedAtStart
	user, system := cpuSeconds()
	emit("window-end")

	r := &results{
		CPU:         map[string]float64{"user_s": user - userStart, "system_s": system - systemStart},
		Pauses:      pauses{Continued: continuedInWindow},
		Latency:     latency{Unit: "ns", Recorded: o.record},
		Connections: details,
	}
	end, warmupCount, all := start, 0, []int64{}
	for _, p := range pairs {
		warmupCount += p.warmupRoundtrips
		r.Roundtrips += p.roundtrips
		r.Pauses.LatencyDropped += p.pauses.dropped
		if p.end.After(end) {
			end = p.end
		}
		if len(pairs) > 1 {
			r.PerPairRoundtrips = append(r.PerPairRoundtrips, p.roundtrips)
			if o.record {
				all = append(all, p.latencies...)
				r.PerPairValueCounts = append(r.PerPairValueCounts, valueCounts(p.latencies))
			}
		}
	}
	r.ElapsedS = end.Sub(start).Seconds()
	r.RoundtripsPerS = float64(r.Roundtrips) / r.ElapsedS
	r.Warmup = map[string]any{"roundtrips": warmupCount, "elapsed_s": start.Sub(warmupStart).Seconds()}
	if o.record && len(pairs) == 1 {
		r.Latency.ValueCounts = valueCounts(pairs[0].latencies)
	} else if o.record {
		r.Latency.ValueCounts = valueCounts(all)
	}
	return r, nil
}

// flagError says what the flag package found wrong, with the contract's double dashes.
func flagError(err error) string {
	if name, found := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); found {
		return "unknown option --" + name
	}
	return strings.NewReplacer("flag -", "flag --", ": -", ": --").Replace(err.Error())
}

func usageError(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "go_ws_client: "+format+"\n", args...)
	os.Exit(2)
}

func main() {
	flags := flag.NewFlagSet("go_ws_client", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	rawURL := flags.String("url", "", "")
	duration := flags.Float64("duration", 5, "")
	warmup := flags.Float64("warmup", 1, "")
	loop := flags.String("loop", "auto", "")
	compression := flags.String("compression", "default", "")
	size := flags.Int("payload-size", 4, "")
	kind := flags.String("payload-kind", "text-ascii", "")
	stall := flags.Float64("stall-timeout", 10, "")
	caFile := flags.String("tls-ca", "", "")
	noLatency := flags.Bool("no-latency", false, "")
	pairs := flags.Int("pairs", 1, "")
	usage := "usage: go_ws_client --url ws[s]://H:P/ROOM --duration S --warmup W [--loop auto] " +
		"[--compression default|off|on] [--payload-size N] [--payload-kind text-ascii|text-utf8|binary] " +
		"[--stall-timeout S] [--pairs N] [--tls-ca FILE] [--no-latency]"
	if err := flags.Parse(os.Args[1:]); err != nil {
		if name, found := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); found &&
			slices.Contains([]string{"workload", "rate", "idle-connections", "receivers",
				"broadcast-role", "ack-processes", "ab-windows"}, name) {
			usageError("--%s is not supported: this client runs the closed-loop pingpong workload only", name)
		}
		usageError("%s; %s", flagError(err), usage)
	}
	target, err := url.Parse(*rawURL)
	finite := func(x float64) bool { return !math.IsInf(x, 0) && !math.IsNaN(x) }
	switch {
	case flags.NArg() > 0:
		usageError("unexpected argument %q; %s", flags.Arg(0), usage)
	case err != nil || (target.Scheme != "ws" && target.Scheme != "wss") || target.Host == "":
		usageError("--url must be ws://HOST:PORT/ROOM or wss://HOST:PORT/ROOM; %s", usage)
	case !(*duration > 0) || !(*warmup >= 0) || !(*stall > 0) || !finite(*duration+*warmup+*stall) || *size < 1:
		usageError("--duration and --stall-timeout must be > 0, --warmup >= 0, --payload-size >= 1")
	case *pairs < 1:
		usageError("--pairs must be >= 1 (this client holds no idle connections, so no --pairs 0)")
	case *kind != "text-ascii" && *kind != "text-utf8" && *kind != "binary":
		usageError("--payload-kind must be text-ascii, text-utf8 or binary")
	case *compression != "default" && *compression != "off" && *compression != "on":
		usageError("--compression must be default, off or on")
	case *loop != "auto":
		usageError("--loop %s is not available here (use auto: Go's netpoller)", *loop)
	}
	o := &options{url: *rawURL, duration: time.Duration(*duration * 1e9), warmup: time.Duration(*warmup * 1e9),
		stall: time.Duration(*stall * 1e9), kind: *kind, size: *size, pairs: *pairs, record: !*noLatency}
	// gorilla's Dialer offers permessage-deflate only with EnableCompression: default = off.
	o.dialer = websocket.Dialer{HandshakeTimeout: o.stall, EnableCompression: *compression == "on"}
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		roots := x509.NewCertPool()
		if err != nil {
			usageError("--tls-ca: %v", err)
		} else if !roots.AppendCertsFromPEM(pem) {
			usageError("--tls-ca %s holds no PEM certificate", *caFile)
		}
		o.dialer.TLSClientConfig = &tls.Config{RootCAs: roots}
	}
	rep := &report{FormatVersion: 1, Role: "client", Implementation: "go-gorilla",
		Runtime:   map[string]string{"name": "go", "version": runtime.Version()},
		Libraries: map[string]string{"gorilla/websocket": buildinfo.GorillaVersion()}, Loop: "go-netpoll",
		Settings: map[string]any{"compression": *compression, "compression_offered": o.dialer.EnableCompression,
			"tls": target.Scheme == "wss", "handshake_timeout_s": o.stall.Seconds()},
		Payload: map[string]any{"kind": *kind, "size": *size}, Workload: "pingpong", Pairs: *pairs}

	if fd, ok := envFD("PINGPONG_EVENTS_FD"); ok {
		eventsFD = fd
	}
	countPauses()
	if fd, ok := envFD("PINGPONG_START_FD"); ok {
		emit("armed")
		if !readGo(fd) {
			os.Exit(0) // started ahead of its turn and not needed: no connection, no report
		}
	}
	rep.results, err = run(o)
	if err != nil {
		message := strings.ReplaceAll(err.Error(), "\n", " ")
		rep.Error, rep.Errors = &message, 1
		fmt.Fprintf(os.Stderr, "go-gorilla client: %s\n", message)
	}
	out := json.NewEncoder(os.Stdout)
	out.SetEscapeHTML(false)
	out.Encode(rep)
	if err != nil {
		os.Exit(1)
	}
}
