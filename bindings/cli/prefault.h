/* Copy-on-write faults taken ahead of time (session.c's spare worker). */
#ifndef A3S_PREFAULT_H
#define A3S_PREFAULT_H

/* Makes every private writable page of this process its own now (MADV_POPULATE_WRITE):
 * a forked worker that does it while idle takes no copy-on-write fault when its request
 * comes (on some virtual machines each costs ~10 µs, and a command's run writes hundreds
 * of pages). Best effort: a kernel without it (before 5.14), or a mapping that refuses,
 * is left to fault as usual. */
void a3s_prefault_writable(void);

#endif
