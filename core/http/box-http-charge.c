/* box-http-charge.c: bytes an answer holds, charged to an account (see
 * box-http-charge.h). */
#include "config.h"

#include "box-http-charge.h"

#define CHARGE_KEY "box-http-charge"

struct _BoxHttpAccount {
  gsize bytes;
};

struct _BoxHttpCharge {
  BoxHttpAccount *account;
  gsize           bytes;
};

BoxHttpAccount *
box_http_account_new (void)
{
  return g_rc_box_new0 (BoxHttpAccount);
}

BoxHttpAccount *
box_http_account_ref (BoxHttpAccount *account)
{
  return g_rc_box_acquire (account);
}

void
box_http_account_unref (BoxHttpAccount *account)
{
  g_rc_box_release (account);
}

gsize
box_http_account_get_bytes (BoxHttpAccount *account)
{
  return account->bytes;
}

BoxHttpCharge *
box_http_charge_new (BoxHttpAccount *account, gsize bytes)
{
  BoxHttpCharge *charge = g_rc_box_new0 (BoxHttpCharge);

  charge->account = box_http_account_ref (account);
  box_http_charge_set (charge, bytes);
  return charge;
}

BoxHttpCharge *
box_http_charge_ref (BoxHttpCharge *charge)
{
  return g_rc_box_acquire (charge);
}

static void
charge_clear (BoxHttpCharge *charge)
{
  box_http_charge_set (charge, 0);
  box_http_account_unref (charge->account);
}

void
box_http_charge_unref (BoxHttpCharge *charge)
{
  g_rc_box_release_full (charge, (GDestroyNotify) charge_clear);
}

void
box_http_charge_set (BoxHttpCharge *charge, gsize bytes)
{
  g_assert (charge->account->bytes >= charge->bytes);
  charge->account->bytes = charge->account->bytes - charge->bytes + bytes;
  charge->bytes = bytes;
}

void
box_http_charge_attach (SoupServerMessage *msg, BoxHttpCharge *charge)
{
  g_object_set_data_full (G_OBJECT (msg), CHARGE_KEY, box_http_charge_ref (charge),
                          (GDestroyNotify) box_http_charge_unref);
}

BoxHttpCharge *
box_http_charge_of (SoupServerMessage *msg)
{
  return g_object_get_data (G_OBJECT (msg), CHARGE_KEY);
}
