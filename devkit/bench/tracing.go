package bench

import (
	"context"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// discardExporter is a span exporter that drops what it is given: the cost of tracing
// measured without a collector's.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// discardingProvider is the TracerProvider of the tracing-on rows: every span sampled,
// batched as `oncebox serve` batches them, and dropped by the exporter.
func discardingProvider() *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
}

// tracingCallers is the caller count of the tracing rows' enqueues.
const tracingCallers = 8

func enqueueTracedName() string {
	return enqueueName("Go API", tracingCallers) + ", tracing on (every span sampled, discarding exporter)"
}

func endToEndTracedName(ops int) string {
	return endToEndName(ops) + ", tracing on (every span sampled, discarding exporter)"
}

// tracing measures the enqueue and the end-to-end dispatch with tracing on against the
// same with tracing off, each pair back to back.
func (r *runner) tracing(ctx context.Context) error {
	load := Load{Duration: r.sizes.EnqueueDuration}
	var off, on Measure
	for _, traced := range []bool{false, true} {
		err := r.withSchema(ctx, EnqueuePoolSize([]int{tracingCallers}), func(s *Schema) error {
			if !traced {
				e, err := NewEnqueuer(ctx, s.Pool)
				if err != nil {
					return err
				}
				defer e.Close()
				off, err = e.Go(ctx, tracingCallers, load)
				return err
			}
			tp := discardingProvider()
			defer func() { _ = tp.Shutdown(context.WithoutCancel(ctx)) }()
			e, err := NewTracedEnqueuer(ctx, s.Pool, tp)
			if err != nil {
				return err
			}
			defer e.Close()
			on, err = e.Go(ctx, tracingCallers, load)
			return err
		})
		if err != nil {
			return fmt.Errorf("bench: enqueue, tracing %v: %w", traced, err)
		}
	}
	r.add(ratioRow(enqueueTracedName(), on, "the same, tracing off", off, 0.8))

	settings := Tuned(r.sizes.EndToEndWorkers)
	var e2eOff, e2eOn Measure
	for _, traced := range []bool{false, true} {
		err := r.withSchema(ctx, DispatchPoolSize, func(s *Schema) error {
			p := DispatchParams{Ops: r.sizes.EndToEndOps, Settings: settings}
			var err error
			if !traced {
				e2eOff, err = EndToEnd(ctx, s.Pool, p)
				return err
			}
			tp := discardingProvider()
			defer func() { _ = tp.Shutdown(context.WithoutCancel(ctx)) }()
			p.TracerProvider = tp
			e2eOn, err = EndToEnd(ctx, s.Pool, p)
			return err
		})
		if err != nil {
			return fmt.Errorf("bench: end to end, tracing %v: %w", traced, err)
		}
	}
	r.add(ratioRow(endToEndTracedName(r.sizes.EndToEndOps), e2eOn, "the same, tracing off", e2eOff, 0.8))
	return nil
}
