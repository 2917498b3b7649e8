package main

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/ledgemq/ledge/node/uplink"
)

// sample is the uplink's lag at one moment of the lag phase.
type sample struct {
	T          float64 `json:"t"` // seconds since the phase began
	Produced   uint64  `json:"produced"`
	Forwarded  uint64  `json:"forwarded"`
	LagRecords uint64  `json:"lag_records"`
	LagAge     float64 `json:"lag_age_seconds"`
	State      string  `json:"state"`
	Failures   uint64  `json:"failures"`
	KafkaDown  bool    `json:"kafka_down"`
}

// lagRun is the lag phase's outcome.
type lagRun struct {
	Rate          float64 `json:"rate_records_per_second"`
	Seconds       float64 `json:"seconds"`
	OutageFrom    float64 `json:"outage_from"`
	OutageTo      float64 `json:"outage_to"`
	MaxRecords    uint64  `json:"max_lag_records"`
	MaxAgeSeconds float64 `json:"max_lag_age_seconds"`
	// RecoverySeconds is from Kafka's return to the first sample with at
	// most two batches not forwarded; -1 when the run ended first.
	RecoverySeconds float64 `json:"recovery_seconds"`
	// SteadyRecords and SteadyAge are the median lag before the outage.
	SteadyRecords uint64   `json:"steady_lag_records"`
	SteadyAge     float64  `json:"steady_lag_age_seconds"`
	Failures      uint64   `json:"failures"`
	Samples       []sample `json:"samples"`
}

// lagOverTime produces rate records per second for d (whole batches, as
// they fall due), with Kafka unreachable during [outageAt,
// outageAt+outageFor), and samples the forwarder's status every period.
func (b *bench) lagOverTime(rate float64, d, outageAt, outageFor, period time.Duration) (lagRun, error) {
	res := lagRun{Rate: rate, Seconds: d.Seconds(), OutageFrom: outageAt.Seconds(), OutageTo: (outageAt + outageFor).Seconds(), RecoverySeconds: -1}
	o, id, err := b.owner()
	if err != nil {
		return res, err
	}
	f, err := b.forwarder(o, id, "lag")
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = f.Run(ctx) })
	defer func() { cancel(); wg.Wait(); b.down.Store(false) }()
	for f.Status().State != uplink.Forwarding { // connected: the position is read
		time.Sleep(time.Millisecond)
	}

	start := time.Now()
	var (
		mu       sync.Mutex
		produced uint64
		perr     error
	)
	wg.Go(func() { // the producer: whole batches as they fall due
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			due := uint64(rate * time.Since(start).Seconds())
			for {
				mu.Lock()
				n := produced
				mu.Unlock()
				if n+perBatch > due {
					break
				}
				if err := b.produce(ctx, o); err != nil {
					if ctx.Err() == nil {
						mu.Lock()
						perr = err
						mu.Unlock()
					}
					return
				}
				mu.Lock()
				produced += perBatch
				mu.Unlock()
			}
		}
	})

	tick := time.NewTicker(period)
	defer tick.Stop()
	var steady []sample
	for now := range tick.C {
		el := now.Sub(start)
		if el >= d {
			break
		}
		b.down.Store(el >= outageAt && el < outageAt+outageFor)
		s := f.Status()
		mu.Lock()
		p := produced
		mu.Unlock()
		sm := sample{T: el.Seconds(), Produced: p, Forwarded: s.Forwarded, LagRecords: s.LagRecords,
			LagAge: s.LagAge.Seconds(), State: s.State.String(), Failures: s.Failures, KafkaDown: b.down.Load()}
		res.Samples = append(res.Samples, sm)
		res.MaxRecords = max(res.MaxRecords, sm.LagRecords)
		res.MaxAgeSeconds = max(res.MaxAgeSeconds, sm.LagAge)
		res.Failures = s.Failures
		if el < outageAt && el > time.Second {
			steady = append(steady, sm)
		}
		if res.RecoverySeconds < 0 && el >= outageAt+outageFor && sm.LagRecords <= 2*perBatch {
			res.RecoverySeconds = (el - outageAt - outageFor).Seconds()
		}
	}
	mu.Lock()
	err = perr
	mu.Unlock()
	res.SteadyRecords, res.SteadyAge = medianLag(steady)
	return res, err
}

func medianLag(s []sample) (uint64, float64) {
	if len(s) == 0 {
		return 0, 0
	}
	recs := make([]uint64, len(s))
	ages := make([]float64, len(s))
	for i, x := range s {
		recs[i], ages[i] = x.LagRecords, x.LagAge
	}
	return median(recs), median(ages)
}

func median[T uint64 | float64](xs []T) T {
	slices.Sort(xs)
	return xs[len(xs)/2]
}
