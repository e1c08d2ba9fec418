/* The setup step's identity switch (setup_identity.c). Part of the in-sandbox launcher,
 * never of the library. */
#ifndef A3S_SETUP_IDENTITY_H
#define A3S_SETUP_IDENTITY_H

/* Switch to (run_uid, run_gid) in the sandbox's user namespace, then enter a nested one
 * that shows the command (show_uid, show_gid), with no capability left (bounding set,
 * ambient, effective, permitted), and securebits that keep any from coming back. On
 * failure a message is on stderr and -1 is returned: the command must not run. */
int a3s_setup_identity(unsigned run_uid, unsigned run_gid, unsigned show_uid,
                       unsigned show_gid);

#endif
