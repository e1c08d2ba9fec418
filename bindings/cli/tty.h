/* --tty: the pseudo-terminal the CLI owns for an interactive command, and the caller's
 * terminal in raw mode for the length of the run. */
#ifndef A3S_CLI_TTY_H
#define A3S_CLI_TTY_H

/* Opens a fresh pty and copies the caller's window size (stdin's terminal, else
 * stdout's) onto it. Returns its master (CLOEXEC), or -1 with errno. */
int cli_tty_open(void);

/* When stdin is a terminal in whose foreground we run: raw mode (every byte, ^C and ^Z
 * included, goes to the command's terminal, whose own line discipline acts on them),
 * restored by cli_tty_end and at exit. Window size changes follow (SIGWINCH). */
void cli_tty_start(void);

/* Restores the caller's terminal (idempotent) and closes the master. */
void cli_tty_end(void);

#endif
