/* libvirt-guest-test.c: the guest set-up (box-libvirt-guest.c) against a
 * scripted fake agent on the VM's socket path, no VM: the CA a warm-up
 * sends ahead of a create, and a guest that refuses it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* accept4 */
#endif
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent-test-util.h"
#include "box-engine.h"
#include "box-libvirt-private.h"

#define PEM "-----BEGIN CERTIFICATE-----\nQUJD\n-----END CERTIFICATE-----\n"

typedef struct {
  char             *dir;
  char             *path;      /* the socket the set-up connects to */
  int               listener;
  BoxEngine        *engine;
  BoxPluginContext *context;
  FakeAgent        *fake;
} Fixture;

static void
fixture_set_up (Fixture *f, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  struct sockaddr_un addr = { .sun_family = AF_UNIX };

  f->dir = g_dir_make_tmp ("libvirt-guest-test-XXXXXX", &error);
  g_assert_no_error (error);
  f->path = g_build_filename (f->dir, "agent.sock", NULL);
  g_assert_cmpuint (strlen (f->path), <, sizeof addr.sun_path);
  strcpy (addr.sun_path, f->path);
  f->listener = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  g_assert_cmpint (f->listener, >=, 0);
  g_assert_cmpint (bind (f->listener, (struct sockaddr *) &addr, sizeof addr), ==, 0);
  g_assert_cmpint (listen (f->listener, 1), ==, 0);
  f->engine = box_engine_new (box_config_new ());
  f->context = box_engine_new_plugin_context (f->engine, "libvirt");
}

static void
fixture_tear_down (Fixture *f, gconstpointer data)
{
  g_clear_pointer (&f->fake, fake_agent_free);
  close (f->listener);
  g_unlink (f->path);
  g_rmdir (f->dir);
  g_clear_object (&f->context);
  g_clear_object (&f->engine);
  g_free (f->path);
  g_free (f->dir);
}

/* The set-up's connection, accepted as a fake agent (the main context
 * runs meanwhile: the set-up connects from it). */
static void
accept_agent (Fixture *f)
{
  int fd = -1;
  int saved_errno = 0;

  AGENT_TEST_WAIT_FOR ((fd = accept4 (f->listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0 ||
                       ((saved_errno = errno) != EAGAIN && saved_errno != EWOULDBLOCK &&
                        saved_errno != EINTR));
  if (fd < 0)
    g_error ("accept: %s", g_strerror (saved_errno));
  f->fake = g_new0 (FakeAgent, 1);
  f->fake->fd = fd;
  f->fake->decoder = box_agent_decoder_new ();
}

/* The next request, which must be @op; answered ok, or refused with @code. */
static JsonObject *
answer (Fixture *f, const char *op, const char *code)
{
  JsonObject *request = fake_agent_read_request (f->fake);
  g_autofree char *reply = NULL;
  gint64 id = 0;

  g_assert_cmpstr (box_agent_json_get_string (request, "op"), ==, op);
  g_assert_true (box_agent_json_get_int (request, "id", &id));
  if (code == NULL)
    reply = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":true}", id);
  else
    reply = g_strdup_printf ("{\"id\":%" G_GINT64_FORMAT ",\"ok\":false,"
                             "\"error\":{\"code\":\"%s\",\"message\":\"refused\"}}", id, code);
  fake_agent_send_json (f->fake, 0, reply);
  return request;
}

/* Starts a set-up of set-time (and trust-ca when @pem) and answers hello. */
static void
start (Fixture *f, GBytes *pem, GAsyncResult **result)
{
  BoxLibvirtGuestSetup setup = {
    .context = f->context,
    .socket_path = f->path,
    .steps = BOX_LIBVIRT_GUEST_TIME | BOX_LIBVIRT_GUEST_TRUST_CA,
    .ca_pem = pem,
    .timeout_s = 30,
  };
  g_autoptr(JsonObject) hello = NULL;

  box_libvirt_guest_setup_async (&setup, NULL, agent_test_store_result, result);
  accept_agent (f);
  hello = fake_agent_read_request (f->fake);
  fake_agent_reply_hello (f->fake, hello);
}

static BoxAgent *
finish (GAsyncResult **result)
{
  g_autoptr(GError) error = NULL;
  BoxAgent *agent = box_libvirt_guest_setup_finish (agent_test_wait_result (result), &error);

  g_assert_no_error (error);
  g_assert_nonnull (agent);
  return agent;
}

/* The CA goes to the guest as trust-ca, after the steps before it.  A
 * guest that refuses it (@data: the code it answers, NULL for none) still
 * gets its set-up: the engine sends the CA again at the create, so the
 * warm-up carries on without it. */
static void
test_trust_ca (Fixture *f, gconstpointer data)
{
  const char *refusal = data;
  g_autoptr(GBytes) pem = g_bytes_new_static (PEM, strlen (PEM));
  g_autoptr(GAsyncResult) result = NULL;
  g_autoptr(JsonObject) time_request = NULL;
  g_autoptr(JsonObject) trust_request = NULL;
  g_autoptr(BoxAgent) agent = NULL;

  start (f, pem, &result);
  time_request = answer (f, "set-time", NULL);
  trust_request = answer (f, "trust-ca", refusal);
  g_assert_cmpstr (box_agent_json_get_string (trust_request, "pem"), ==, PEM);
  agent = finish (&result);
  box_agent_close (agent);
}

/* Without a CA (no broker) the step is left out: set-time is the last
 * request, and the set-up is done once it is answered. */
static void
test_no_ca (Fixture *f, gconstpointer data)
{
  g_autoptr(GAsyncResult) result = NULL;
  g_autoptr(JsonObject) time_request = NULL;
  g_autoptr(BoxAgent) agent = NULL;

  start (f, NULL, &result);
  time_request = answer (f, "set-time", NULL);
  agent = finish (&result);
  /* nothing else was asked: not in what was read, not on the socket */
  g_assert_cmpuint (box_agent_decoder_get_buffered (f->fake->decoder), ==, 0);
  g_assert_false (fake_agent_poll (f->fake));
  box_agent_close (agent);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  agent_test_init ();
#define ADD(path, data, fn) \
  g_test_add ("/libvirt-guest/" path, Fixture, data, fixture_set_up, fn, fixture_tear_down)
  ADD ("trust-ca", NULL, test_trust_ca);
  ADD ("trust-ca-refused", "unknown_op", test_trust_ca);
  ADD ("no-ca", NULL, test_no_ca);
  return g_test_run ();
}
