// Package report holds the comparison's results — every run of every
// cell, the ceilings, the targets — and writes them out: a markdown
// table of absolute figures and median ratios, the same as JSON for
// machines, and charts of throughput by message size and of latency
// percentiles.
//
// A ratio is computed within a pair (the runs of one round, next to each
// other in time) and the table shows the median of those ratios, which
// keeps a burst of load from elsewhere on the machine from landing on one
// side only.
package report
