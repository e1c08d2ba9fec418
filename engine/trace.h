/* Phase times, for the opt-in tracing build only (cmake -DA3S_TRACE=ON; scripts/bench.sh
 * makes one to print where a run's time goes). There, with A3S_SANDBOX_TRACE set in the
 * environment, each mark is written to stderr as "a3s-trace <ms since the first mark>
 * <phase>". In every other build a mark compiles to nothing: the library never prints. */
#ifndef A3S_TRACE_H
#define A3S_TRACE_H

#ifdef A3S_TRACE
void a3s_trace_mark(const char *phase);
#else
static inline void a3s_trace_mark(const char *phase)
{
    (void)phase;
}
#endif

#endif
