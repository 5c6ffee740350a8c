/*
 * hgctl_tools.h - the hedger, statement and replay commands of hgctl
 * (hgctl_tools.c), called from hgctl.c's command table.
 *
 * Each takes the arguments after its command name and returns the process
 * exit status: 0 success, 1 input error or (replay) differences found,
 * 2 usage error. They print results on stdout and errors on stderr. Main
 * thread only.
 */
#ifndef HOURGLASS_HGCTL_TOOLS_H
#define HOURGLASS_HGCTL_TOOLS_H

int hgctl_hedge_size(int argc, char **argv);
int hgctl_hedge_ratio(int argc, char **argv);
int hgctl_convert(int argc, char **argv);
int hgctl_statement(int argc, char **argv);
int hgctl_replay(int argc, char **argv);

#endif /* HOURGLASS_HGCTL_TOOLS_H */
