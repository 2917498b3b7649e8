package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ledgemq/ledge/sdk"
	"github.com/spf13/cobra"
)

type produceFlags struct {
	file      string
	key       string
	headers   []string
	partition int
	maxLine   string
	linger    time.Duration
}

func newProduceCommand() *cobra.Command {
	var f produceFlags
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Send lines from stdin or a file to a topic, one record per line",
		Long: `Read lines from stdin (or --file) and produce each as a record (without its
line ending). Records are batched and pipelined; the command returns once
every record is acknowledged, per the topic's durability, and fails if
any was refused. Reading a file with stderr on a terminal shows a
progress bar.`,
		Example: `  echo hello | ledge produce demo
  ledge produce orders --file orders.jsonl --key store-42 --header source=import
  seq 1000 | ledge produce counters --partition 2`,
		Args: cobra.ExactArgs(1),
	}
	cf := addClientFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error { return runProduce(cmd, cf, args[0], &f) }
	fs := cmd.Flags()
	fs.StringVarP(&f.file, "file", "f", "", "read lines from this file instead of stdin")
	fs.StringVarP(&f.key, "key", "k", "", "key of every record (records with a key go to the partition its hash picks)")
	fs.StringArrayVarP(&f.headers, "header", "H", nil, "header k=v added to every record (repeatable)")
	fs.IntVarP(&f.partition, "partition", "p", -1, "send every record to this partition (default: by key hash, else round-robin by batch)")
	fs.StringVar(&f.maxLine, "max-line", "1MiB", "longest line accepted")
	fs.DurationVar(&f.linger, "linger", 0, "hold partial batches this long for more lines")
	return cmd
}

func runProduce(cmd *cobra.Command, cf *clientFlags, topic string, f *produceFlags) error {
	var headers []sdk.Header
	for _, h := range f.headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			return fmt.Errorf("--header %q: want key=value", h)
		}
		headers = append(headers, sdk.Header{Key: k, Value: []byte(v)})
	}
	maxLine, err := parseSize(f.maxLine)
	if err != nil || maxLine <= 0 {
		return fmt.Errorf("--max-line: invalid size %q", f.maxLine)
	}
	var key []byte
	if cmd.Flags().Changed("key") {
		key = []byte(f.key)
	}

	in := cmd.InOrStdin()
	var size int64 = -1
	var progress *progressBar
	if f.file != "" {
		file, err := os.Open(f.file)
		if err != nil {
			return err
		}
		defer file.Close()
		in = file
		if fi, err := file.Stat(); err == nil && fi.Mode().IsRegular() {
			size = fi.Size()
		}
		if stderr, ok := cmd.ErrOrStderr().(*os.File); ok && isTerminal(stderr) {
			progress = newProgressBar(stderr, size)
		}
	}

	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := cf.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	var busy sync.Once // the producer waits the node's retry-after itself: say so once
	opts := []sdk.ProducerOption{sdk.WithLinger(f.linger), sdk.WithMaxBatchBytes(int(maxLine) + 64<<10),
		sdk.WithOnBusy(func(time.Duration) {
			busy.Do(func() { fmt.Fprintln(cmd.ErrOrStderr(), "ledge: node busy, retrying") })
		})}
	if f.partition >= 0 {
		opts = append(opts, sdk.WithPartitioner(sdk.ManualPartitioner()))
	}
	p, err := c.NewProducer(ctx, topic, opts...)
	if err != nil {
		return err
	}

	var (
		sent, acked atomic.Int64
		errMu       sync.Mutex
		firstErr    error
		failed      atomic.Int64
	)
	cb := func(_ *sdk.Record, err error) {
		if err != nil {
			failed.Add(1)
			errMu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			errMu.Unlock()
			return
		}
		acked.Add(1)
	}
	var read int64
	readErr := readLines(ctx, in, int(maxLine), func(line []byte, n int) {
		read += int64(n)
		rec := &sdk.Record{Key: key, Value: line, Headers: headers, Partition: int32(f.partition)}
		sent.Add(1)
		p.Produce(ctx, rec, cb)
		if progress != nil {
			progress.update(read, sent.Load())
		}
	})
	if ctx.Err() != nil {
		stop() // a second interrupt ends the process at once
	}
	closeErr := p.Close(context.WithoutCancel(ctx))
	if progress != nil {
		progress.last = time.Time{}
		progress.update(read, sent.Load())
		progress.finish()
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "produced %s to %s", plural(int(acked.Load()), "record"), topic)
	if n := failed.Load(); n > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), " (%d failed)", n)
	}
	fmt.Fprintln(cmd.ErrOrStderr())
	switch {
	case readErr != nil && !errors.Is(readErr, context.Canceled):
		return readErr
	case firstErr != nil:
		return firstErr
	case closeErr != nil:
		return closeErr
	}
	return ctx.Err()
}

// readLines calls fn with each line of r (without its line ending) and the
// bytes it took, until EOF or ctx ends. Each line is a new slice.
func readLines(ctx context.Context, r io.Reader, maxLine int, fn func(line []byte, n int)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for ctx.Err() == nil {
		line, err := readLine(br, maxLine)
		if len(line) > 0 || (err == nil) {
			n := len(line) + 1
			line = trimEOL(line)
			fn(line, n)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// readLine reads up to and including '\n', failing past maxLine bytes.
func readLine(br *bufio.Reader, maxLine int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > maxLine+2 {
			return nil, fmt.Errorf("a line is longer than --max-line (%d bytes)", maxLine)
		}
		line = append(line, chunk...)
		if err != bufio.ErrBufferFull {
			return line, err
		}
	}
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b
}

// progressBar draws one line on a terminal, at most ten times a second.
type progressBar struct {
	w     io.Writer
	total int64
	start time.Time
	last  time.Time
}

func newProgressBar(w io.Writer, total int64) *progressBar {
	return &progressBar{w: w, total: total, start: time.Now()}
}

func (b *progressBar) update(done, records int64) {
	now := time.Now()
	if now.Sub(b.last) < 100*time.Millisecond {
		return
	}
	b.last = now
	rate := float64(records) / max(now.Sub(b.start).Seconds(), 1e-3)
	if b.total <= 0 {
		fmt.Fprintf(b.w, "\r%d records, %s, %.0f records/s ", records, formatBytes(done), rate)
		return
	}
	frac := min(float64(done)/float64(b.total), 1)
	const width = 30
	filled := int(frac * width)
	fmt.Fprintf(b.w, "\r[%s%s] %5.1f%%  %d records  %s/%s  %.0f records/s ",
		strings.Repeat("=", filled), strings.Repeat(" ", width-filled), frac*100,
		records, formatBytes(done), formatBytes(b.total), rate)
}

func (b *progressBar) finish() { fmt.Fprintln(b.w) }
