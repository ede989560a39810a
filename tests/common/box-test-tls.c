/* box-test-tls.c: see box-test-tls.h. */
#include "config.h"

#include "box-test-tls.h"

#include <errno.h>
#include <gnutls/gnutls.h>
#include <string.h>

static ssize_t
capture_push (gnutls_transport_ptr_t ptr, const void *data, size_t len)
{
  g_byte_array_append (ptr, data, (guint) len);
  return (ssize_t) len;
}

static ssize_t
nothing_pull (gnutls_transport_ptr_t ptr, void *data, size_t len)
{
  errno = EAGAIN;
  return -1;
}

GByteArray *
box_test_client_hello (const char *server_name)
{
  GByteArray *bytes = g_byte_array_new ();
  gnutls_session_t session;
  gnutls_certificate_credentials_t creds;

  g_assert_cmpint (gnutls_certificate_allocate_credentials (&creds), ==, 0);
  g_assert_cmpint (gnutls_init (&session, GNUTLS_CLIENT | GNUTLS_NONBLOCK), ==, 0);
  g_assert_cmpint (gnutls_set_default_priority (session), ==, 0);
  g_assert_cmpint (gnutls_credentials_set (session, GNUTLS_CRD_CERTIFICATE, creds), ==, 0);
  if (server_name != NULL)
    g_assert_cmpint (gnutls_server_name_set (session, GNUTLS_NAME_DNS, server_name,
                                             strlen (server_name)), ==, 0);
  gnutls_transport_set_ptr (session, bytes);
  gnutls_transport_set_push_function (session, capture_push);
  gnutls_transport_set_pull_function (session, nothing_pull);
  g_assert_cmpint (gnutls_handshake (session), ==, GNUTLS_E_AGAIN);
  gnutls_deinit (session);
  gnutls_certificate_free_credentials (creds);
  g_assert_cmpuint (bytes->len, >, 5);
  return bytes;
}
