/* box-http-charge.h: bytes an answer holds in boxd until it is written,
 * charged to an account.
 *
 * An account (BoxHttpAccount) is one total, e.g. all the in-sandbox
 * exec/run answers of one sandbox (box-insandbox.c), that admission checks
 * against a budget.  A charge (BoxHttpCharge) is one answer's part of it:
 * box_http_charge_set() moves the account by the difference, and the last
 * reference to the charge takes its bytes off the account.  Both are
 * reference counted, so that an answer and the connection it came on may
 * end in either order.  Main thread only.
 */
#pragma once

#include <libsoup/soup.h>

G_BEGIN_DECLS

typedef struct _BoxHttpAccount BoxHttpAccount;
typedef struct _BoxHttpCharge  BoxHttpCharge;

BoxHttpAccount *box_http_account_new       (void);
BoxHttpAccount *box_http_account_ref       (BoxHttpAccount *account);
void            box_http_account_unref     (BoxHttpAccount *account);
/* what the account's charges hold now */
gsize           box_http_account_get_bytes (BoxHttpAccount *account);

/* A charge of @bytes (a reservation, until the answer knows its size). */
BoxHttpCharge  *box_http_charge_new        (BoxHttpAccount *account, gsize bytes);
BoxHttpCharge  *box_http_charge_ref        (BoxHttpCharge *charge);
void            box_http_charge_unref      (BoxHttpCharge *charge);
void            box_http_charge_set        (BoxHttpCharge *charge, gsize bytes);

/* The charge an answer to @msg books its bytes on (a reference is kept
 * with the message); NULL when nobody asked for one. */
void            box_http_charge_attach     (SoupServerMessage *msg, BoxHttpCharge *charge);
BoxHttpCharge  *box_http_charge_of         (SoupServerMessage *msg);

G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxHttpAccount, box_http_account_unref)
G_DEFINE_AUTOPTR_CLEANUP_FUNC (BoxHttpCharge, box_http_charge_unref)

G_END_DECLS
