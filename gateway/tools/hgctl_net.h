/*
 * hgctl_net.h (internal) - hgctl's network commands (hgctl_trade.c,
 * hgctl_op.c, hgctl_risk.c; what they share is in hgctl_net_util.h), which
 * talk to a running gateway through the client library. Each has the
 * signature of an hgctl command: (argc, argv) after the group and verb, and
 * returns the exit status (0 ok, 1 refused or failed, 2 usage).
 */
#ifndef HG_GATEWAY_HGCTL_NET_H
#define HG_GATEWAY_HGCTL_NET_H

int hgctl_order_new(int argc, char **argv);
int hgctl_order_cancel(int argc, char **argv);
int hgctl_order_replace(int argc, char **argv);
int hgctl_order_mass_cancel(int argc, char **argv);
int hgctl_instruments(int argc, char **argv);
int hgctl_ladder(int argc, char **argv);
int hgctl_positions(int argc, char **argv);
/* hgctl orders: the key's live orders (see hgctl_trade.c for how they are found). */
int hgctl_orders(int argc, char **argv);
int hgctl_executions(int argc, char **argv);
/* Operator commands (`hgctl op ...`). */
int hgctl_op_settle(int argc, char **argv);
int hgctl_op_mark(int argc, char **argv);
int hgctl_op_fund(int argc, char **argv);
int hgctl_op_expire(int argc, char **argv);
int hgctl_op_fixing(int argc, char **argv);
int hgctl_op_samples(int argc, char **argv);
int hgctl_op_list(int argc, char **argv);
int hgctl_op_halt(int argc, char **argv);
int hgctl_op_resume(int argc, char **argv);
int hgctl_op_add_account(int argc, char **argv);
int hgctl_op_deposit(int argc, char **argv);
int hgctl_op_end_of_session(int argc, char **argv);
int hgctl_op_delist(int argc, char **argv);
int hgctl_op_withdraw(int argc, char **argv);
int hgctl_op_list_curve(int argc, char **argv);
int hgctl_op_cluster(int argc, char **argv);
int hgctl_op_add_key(int argc, char **argv);
int hgctl_quote(int argc, char **argv);
int hgctl_dropcopy(int argc, char **argv);
/* hgctl statement --remote: the statement fetched from the gateway. */
int hgctl_statement_remote(int argc, char **argv);

#endif /* HG_GATEWAY_HGCTL_NET_H */
