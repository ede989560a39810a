/* nftables-netns-broker.c: TLS connections of sandboxes that use secrets,
 * handed to the secrets broker, in the world of nftables-netns-test.h:
 * sandbox b unrestricted, a restricted.
 *
 * The broker is the test's own (TestBroker below): it wants the names it
 * was told, records each call, and answers a taken connection itself
 * ("brokered " and the upstream's greeting), so the test sees the bytes
 * the proxy handed over and that the upstream socket is live.  The
 * ClientHellos are real ones (OpenSSL's and GnuTLS's, from the SNI
 * fuzzer's corpus).  The "internet" serves 443 with the helper's "hold"
 * server (greets "hello\n", echoes, closes at the client's half-close), so
 * a spliced connection comes back as "hello\n" and the hello itself. */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "box-error.h"
#include "box-nftables-plugin-private.h"
#include "nftables-netns-test.h"

#define INET     "203.0.113.1"
#define WANTED   "api.example.com"   /* tls-openssl-sni */
#define OTHER    "www.example.org"   /* tls-gnutls-sni */

/* ---- the test broker ---- */

typedef struct {
  char   *sandbox_id;
  char   *host;
  GBytes *head;
  char   *upstream_peer;   /* "address:port" */
} Taken;

static void
taken_free (Taken *taken)
{
  g_free (taken->sandbox_id);
  g_free (taken->host);
  g_bytes_unref (taken->head);
  g_free (taken->upstream_peer);
  g_free (taken);
}

#define TEST_TYPE_BROKER (test_broker_get_type ())
G_DECLARE_FINAL_TYPE (TestBroker, test_broker, TEST, BROKER, GObject)

struct _TestBroker {
  GObject    parent_instance;
  GMutex     lock;
  char     **wanted;   /* host names */
  GPtrArray *asked;    /* "sandbox host" of each wants() */
  GPtrArray *taken;    /* Taken* */
  gint       take_ms;  /* atomic: how long take_connection() takes */
  gint       in_take;  /* atomic: a take_connection() has begun */
  gint       n_done;   /* atomic: take_connection() calls returned */
};

static void test_broker_iface_init (BoxBrokerInterface *iface);

G_DEFINE_TYPE_WITH_CODE (TestBroker, test_broker, G_TYPE_OBJECT,
                         G_IMPLEMENT_INTERFACE (BOX_TYPE_BROKER, test_broker_iface_init))

static gboolean
test_broker_wants (BoxBroker *broker, const char *sandbox_id, const char *host)
{
  TestBroker *self = TEST_BROKER (broker);
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&self->lock);

  g_ptr_array_add (self->asked, g_strdup_printf ("%s %s", sandbox_id, host));
  return g_strv_contains ((const char *const *) self->wanted, host);
}

typedef struct {
  int client;
  int upstream;
} Answer;

/* Its own thread, as a broker's work is: the upstream's greeting goes to
 * the client after "brokered ", then both close. */
static gpointer
answer_thread (gpointer data)
{
  g_autofree Answer *answer = data;
  struct pollfd p = { .fd = answer->upstream, .events = POLLIN };
  char greeting[16] = "";
  g_autofree char *reply = NULL;
  ssize_t n = 0;

  if (poll (&p, 1, 3000) == 1)
    n = recv (answer->upstream, greeting, sizeof greeting - 1, 0);
  reply = g_strdup_printf ("brokered %s", n > 0 ? greeting : "(no greeting)\n");
  (void) send (answer->client, reply, strlen (reply), MSG_NOSIGNAL);
  close (answer->client);
  close (answer->upstream);
  return NULL;
}

static gboolean
test_broker_take_connection (BoxBroker *broker, const char *sandbox_id, const char *host,
                             int client_fd, GBytes *client_head, int upstream_fd,
                             GError **error)
{
  TestBroker *self = TEST_BROKER (broker);
  Taken *taken = g_new0 (Taken, 1);
  Answer *answer = g_new0 (Answer, 1);
  struct sockaddr_in peer;
  socklen_t len = sizeof peer;
  char address[INET_ADDRSTRLEN] = "";

  taken->sandbox_id = g_strdup (sandbox_id);
  taken->host = g_strdup (host);
  taken->head = client_head != NULL ? g_bytes_ref (client_head) : NULL;
  if (getpeername (upstream_fd, (struct sockaddr *) &peer, &len) == 0)
    taken->upstream_peer = g_strdup_printf ("%s:%u",
                                            inet_ntop (AF_INET, &peer.sin_addr, address,
                                                       sizeof address),
                                            ntohs (peer.sin_port));
  g_mutex_lock (&self->lock);
  g_ptr_array_add (self->taken, taken);
  g_mutex_unlock (&self->lock);
  answer->client = client_fd;
  answer->upstream = upstream_fd;
  g_thread_unref (g_thread_new ("test-broker", answer_thread, answer));
  g_atomic_int_set (&self->in_take, 1);
  g_usleep ((gulong) g_atomic_int_get (&self->take_ms) * 1000);
  g_atomic_int_inc (&self->n_done);
  return TRUE;
}

static void
test_broker_finalize (GObject *object)
{
  TestBroker *self = TEST_BROKER (object);

  g_strfreev (self->wanted);
  g_ptr_array_unref (self->asked);
  g_ptr_array_unref (self->taken);
  g_mutex_clear (&self->lock);
  G_OBJECT_CLASS (test_broker_parent_class)->finalize (object);
}

static void
test_broker_init (TestBroker *self)
{
  g_mutex_init (&self->lock);
  self->asked = g_ptr_array_new_with_free_func (g_free);
  self->taken = g_ptr_array_new_with_free_func ((GDestroyNotify) taken_free);
}

static void
test_broker_class_init (TestBrokerClass *klass)
{
  G_OBJECT_CLASS (klass)->finalize = test_broker_finalize;
}

static void
test_broker_iface_init (BoxBrokerInterface *iface)
{
  iface->wants = test_broker_wants;
  iface->take_connection = test_broker_take_connection;
}

static TestBroker *broker;

static guint
n_taken (void)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&broker->lock);

  return broker->taken->len;
}

static gboolean
was_asked (const char *sandbox_id, const char *host)
{
  g_autofree char *entry = g_strdup_printf ("%s %s", sandbox_id, host);
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&broker->lock);

  for (guint i = 0; i < broker->asked->len; i++)
    if (g_str_equal (broker->asked->pdata[i], entry))
      return TRUE;
  return FALSE;
}

static void
set_wanted (const char *names)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&broker->lock);

  g_strfreev (broker->wanted);
  broker->wanted = g_strsplit (names, " ", -1);
}

/* ---- the world's side ---- */

static gboolean
nobody_came (const char *log_name)
{
  g_autofree char *log = g_build_filename (world.tmp, log_name, NULL);
  g_autofree char *contents = NULL;

  g_assert_true (g_file_get_contents (log, &contents, NULL, NULL));
  return contents[0] == '\0';
}

/* A ClientHello from the SNI fuzzer's corpus (its first byte is the
 * fuzzer's, not the hello's). */
static GBytes *
hello (const char *seed)
{
  g_autofree char *path = g_build_filename (g_getenv ("BOX_SOURCE_ROOT"), "tests", "fuzz",
                                            "corpus", "fuzz-sni", seed, NULL);
  g_autofree char *contents = NULL;
  gsize len;

  g_assert_true (g_file_get_contents (path, &contents, &len, NULL));
  g_assert_cmpuint (len, >, 1);
  return g_bytes_new (contents + 1, len - 1);
}

/* Not TLS at all, and a TLS handshake record that is no ClientHello (a
 * ServerHello's first bytes). */
#define SSH_BANNER "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n"
static const guint8 NOT_A_HELLO[] = { 0x16, 0x03, 0x01, 0x00, 0x04, 0x02, 0x00, 0x00, 0x00 };

/* @bytes, a whole ClientHello, with its extensions' length broken: the
 * parser refuses it, though it starts as a hello naming WANTED. */
static GBytes *
garble (GBytes *bytes)
{
  gsize len;
  const guint8 *data = g_bytes_get_data (bytes, &len);
  guint8 *copy = g_memdup2 (data, len);
  gsize pos = 5 + 4 + 2 + 32;   /* record, handshake header, version, random */

  g_assert_cmpuint (len, >, pos + 1);
  pos += 1 + copy[pos];                                    /* session id */
  g_assert_cmpuint (len, >, pos + 2);
  pos += 2 + (((gsize) copy[pos] << 8) | copy[pos + 1]);   /* cipher suites */
  g_assert_cmpuint (len, >, pos + 1);
  pos += 1 + copy[pos];                                    /* compression methods */
  g_assert_cmpuint (len, >, pos + 2);
  copy[pos] = 0xff;                                        /* extensions: too long */
  copy[pos + 1] = 0xff;
  return g_bytes_new_take (copy, len);
}

static GString *
send_hello (Ns *ns, const char *host, GBytes *bytes, gboolean *reset)
{
  gsize len;
  const void *data = g_bytes_get_data (bytes, &len);

  return exchange_bytes (ns, host, "443", data, len, TRUE, reset);
}

/* "hello\n" and the hello itself: spliced untouched to the hold server */
static void
assert_spliced (Ns *ns, const char *host, GBytes *bytes)
{
  gboolean reset;
  g_autoptr(GString) got = send_hello (ns, host, bytes, &reset);
  gsize len;
  const guint8 *data = g_bytes_get_data (bytes, &len);

  g_assert_false (reset);
  g_assert_cmpuint (got->len, ==, 6 + len);
  g_assert_cmpmem (got->str, 6, "hello\n", 6);
  g_assert_cmpmem (got->str + 6, len, data, len);
}

static void
assert_reset (Ns *ns, const char *host, GBytes *bytes)
{
  gboolean reset;
  g_autoptr(GString) got = send_hello (ns, host, bytes, &reset);

  g_assert_cmpstr (got->str, ==, "");
  g_assert_true (reset);
}

static void
set_brokered (const char *id, gboolean on)
{
  g_autoptr(GError) error = NULL;

  g_assert_true (box_network_set_brokered (BOX_NETWORK (world.plugin), id, on, &error));
  g_assert_no_error (error);
}

static void
serve_hold_443 (Ns *ns, const char *name)
{
  g_autofree char *log = g_build_filename (world.tmp, name, NULL);
  g_autofree char *ready = g_strconcat (log, ".ready", NULL);
  const char *args[] = { "hold", "0.0.0.0", "443", log, NULL };

  serve (ns, args, ready);
}

static void
broker_set_up (void)
{
  g_autoptr(GError) error = NULL;

  if (broker != NULL)
    return;
  /* without a broker there is nothing to hand over to */
  g_assert_false (box_network_set_brokered (BOX_NETWORK (world.plugin), ID_B, TRUE, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_UNSUPPORTED);
  broker = g_object_new (TEST_TYPE_BROKER, NULL);
  set_wanted (WANTED " " OTHER);
  box_network_set_broker (BOX_NETWORK (world.plugin), BOX_BROKER (broker));
  serve_hold_443 (world.inet, "inet443.log");
  serve_hold_443 (world.lan, "lan443.log");
  serve_tcp (NULL, "0.0.0.0", "443", "host443.log");
}

/* b, unrestricted: its 443 goes to the proxy, which connects to the
 * address b dialled and hands a wanted name over; everything else is
 * spliced to that address untouched. */
void
broker_unrestricted (void)
{
  g_autoptr(GBytes) wanted = hello ("tls-openssl-sni");
  g_autoptr(GBytes) other = hello ("tls-gnutls-sni");
  g_autoptr(GBytes) nameless = hello ("tls-openssl-nosni");
  g_autoptr(GBytes) ssh = g_bytes_new_static (SSH_BANNER, strlen (SSH_BANNER));
  g_autoptr(GBytes) odd = g_bytes_new_static (NOT_A_HELLO, sizeof NOT_A_HELLO);
  g_autoptr(GBytes) garbled = garble (wanted);
  g_autoptr(GString) got = NULL;
  gboolean reset;
  Taken *taken;

  broker_set_up ();
  /* not yet brokered: a wanted name goes straight to the internet */
  assert_spliced (world.b, INET, wanted);
  g_assert_cmpuint (n_taken (), ==, 0);

  set_brokered (ID_B, TRUE);
  g_assert_true (in_set ("brokered", "\"bxbbbbbbbbbbbb\""));
  g_assert_false (in_set ("brokered", "\"bxaaaaaaaaaaaa\""));

  got = send_hello (world.b, INET, wanted, &reset);
  g_assert_cmpstr (got->str, ==, "brokered hello\n");
  g_assert_false (reset);
  g_assert_cmpuint (n_taken (), ==, 1);
  taken = broker->taken->pdata[0];
  g_assert_cmpstr (taken->sandbox_id, ==, ID_B);
  g_assert_cmpstr (taken->host, ==, WANTED);
  g_assert_true (g_bytes_equal (taken->head, wanted));   /* every byte read, none lost */
  g_assert_cmpstr (taken->upstream_peer, ==, INET ":443");
  g_assert_true (was_asked (ID_B, WANTED));

  /* another name, and a hello without one (never brokered, never asked) */
  set_wanted (WANTED);
  assert_spliced (world.b, INET, other);
  g_assert_true (was_asked (ID_B, OTHER));
  assert_spliced (world.b, INET, nameless);
  g_assert_cmpuint (n_taken (), ==, 1);
  /* nor is what has no name to read: another protocol on 443 (ssh), a
   * TLS handshake that is no ClientHello, a hello the parser refuses */
  assert_spliced (world.b, INET, ssh);
  assert_spliced (world.b, INET, odd);
  assert_spliced (world.b, INET, garbled);
  g_assert_cmpuint (n_taken (), ==, 1);

  /* never the local networks, the blocked= ones nor the node itself,
   * though each serves 443: a reset, and nothing arrives there */
  assert_reset (world.b, "192.168.77.2", wanted);
  assert_reset (world.b, "198.51.100.7", wanted);
  assert_reset (world.b, "203.0.113.254", wanted);
  assert_reset (world.b, world.att_b->gateway, nameless);
  g_assert_true (nobody_came ("lan443.log"));
  g_assert_true (nobody_came ("host443.log"));
  g_assert_cmpuint (n_taken (), ==, 1);
  /* b's other ports are as before */
  assert_reaches (world.b, INET, "80");

  /* and back: no redirect, the wanted name goes straight out again */
  set_brokered (ID_B, FALSE);
  g_assert_false (in_set ("brokered", "\"bxbbbbbbbbbbbb\""));
  assert_spliced (world.b, INET, wanted);
  g_assert_cmpuint (n_taken (), ==, 1);
  set_wanted (WANTED " " OTHER);
}

static BoxRule *
rule_new (const char *domain)
{
  BoxRule *rule = g_new0 (BoxRule, 1);

  rule->domain = g_strdup (domain);
  rule->allow = TRUE;
  return rule;
}

/* a, restricted and brokered: the policy is asked first (a name it
 * refuses is reset and the broker never hears of it); an allowed wanted
 * name goes to the address the node resolved, then to the broker. */
void
broker_restricted (void)
{
  g_autoptr(GPtrArray) rules = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
  g_autoptr(GPtrArray) none = g_ptr_array_new ();
  g_autoptr(GBytes) wanted = hello ("tls-openssl-sni");
  g_autoptr(GBytes) denied = hello ("tls-gnutls-sni");
  g_autoptr(GBytes) nameless = hello ("tls-openssl-nosni");
  g_autoptr(GBytes) ssh = g_bytes_new_static (SSH_BANNER, strlen (SSH_BANNER));
  g_autoptr(GBytes) garbled = garble (wanted);
  g_autoptr(GString) got = NULL;
  g_autoptr(GError) error = NULL;
  gboolean reset;
  Taken *taken;
  guint before;

  broker_set_up ();
  /* the world's resolver answers 203.0.113.80 for every name */
  must (world.inet, "ip addr add 203.0.113.80/24 dev eth0");
  g_ptr_array_add (rules, rule_new (WANTED));
  g_assert_true (box_network_set_egress (BOX_NETWORK (world.plugin), ID_A, rules, &error));
  g_assert_no_error (error);
  set_brokered (ID_A, TRUE);
  g_assert_true (in_set ("brokered", "\"bxaaaaaaaaaaaa\""));
  before = n_taken ();

  assert_reset (world.a, INET, denied);
  g_assert_false (was_asked (ID_A, OTHER));
  assert_reset (world.a, INET, nameless);   /* no name, no pass when restricted */
  assert_reset (world.a, INET, ssh);
  assert_reset (world.a, INET, garbled);

  got = send_hello (world.a, INET, wanted, &reset);
  g_assert_cmpstr (got->str, ==, "brokered hello\n");
  g_assert_cmpuint (n_taken (), ==, before + 1);
  taken = broker->taken->pdata[before];
  g_assert_cmpstr (taken->sandbox_id, ==, ID_A);
  g_assert_true (g_bytes_equal (taken->head, wanted));
  /* the node's resolution, not the address a dialled */
  g_assert_cmpstr (taken->upstream_peer, ==, "203.0.113.80:443");

  set_brokered (ID_A, FALSE);
  g_assert_true (box_network_set_egress (BOX_NETWORK (world.plugin), ID_A, none, &error));
  g_assert_no_error (error);
  must (world.inet, "ip addr del 203.0.113.80/24 dev eth0");
}

/* Kept by ID: set before the ID has an attachment, applied when a rebind
 * gives it one; the tap leaves the set when it goes to another ID. */
void
broker_membership (void)
{
  g_autoptr(GError) error = NULL;

  broker_set_up ();
  set_brokered (ID_C, TRUE);
  g_assert_false (in_set ("brokered", "\"bxbbbbbbbbbbbb\""));
  g_assert_true (box_network_rebind (BOX_NETWORK (world.plugin), ID_B, ID_C, &error));
  g_assert_no_error (error);
  g_assert_true (in_set ("brokered", "\"bxbbbbbbbbbbbb\""));
  g_assert_true (box_network_rebind (BOX_NETWORK (world.plugin), ID_C, ID_B, &error));
  g_assert_no_error (error);
  g_assert_false (in_set ("brokered", "\"bxbbbbbbbbbbbb\""));
  set_brokered (ID_C, FALSE);
  /* a bad ID changes nothing */
  g_assert_false (box_network_set_brokered (BOX_NETWORK (world.plugin), "../x", TRUE, &error));
  g_assert_error (error, BOX_ERROR, BOX_ERROR_INVALID);
}

typedef struct {
  Ns     *ns;
  GBytes *hello;
  char   *got;
} Sender;

static gpointer
sender_thread (gpointer data)
{
  Sender *sender = data;
  gboolean reset;
  GString *got = send_hello (sender->ns, INET, sender->hello, &reset);

  sender->got = g_string_free (got, FALSE);
  return NULL;
}

/* boxd stops: box_network_set_broker (NULL) returns only once a handover
 * under way has returned (the engine stops the broker right after it);
 * later connections are no longer handed over. */
void
broker_unset_waits (void)
{
  g_autoptr(GBytes) wanted = hello ("tls-openssl-sni");
  Sender sender = { world.b, wanted, NULL };
  GThread *thread;
  gint done;

  broker_set_up ();
  set_brokered (ID_B, TRUE);
  g_atomic_int_set (&broker->in_take, 0);
  g_atomic_int_set (&broker->take_ms, 700);
  done = g_atomic_int_get (&broker->n_done);
  thread = g_thread_new ("sender", sender_thread, &sender);
  while (!g_atomic_int_get (&broker->in_take))
    g_usleep (1000);
  box_network_set_broker (BOX_NETWORK (world.plugin), NULL);
  g_assert_cmpint (g_atomic_int_get (&broker->n_done), ==, done + 1);
  g_thread_join (thread);
  g_assert_cmpstr (sender.got, ==, "brokered hello\n");
  g_free (sender.got);
  g_atomic_int_set (&broker->take_ms, 0);
  /* no broker: spliced to where b dialled, as when not brokered */
  assert_spliced (world.b, INET, wanted);
  g_assert_cmpint (g_atomic_int_get (&broker->n_done), ==, done + 1);
  box_network_set_broker (BOX_NETWORK (world.plugin), BOX_BROKER (broker));
  set_brokered (ID_B, FALSE);
}

/* A protocol whose server speaks first on 443: no ClientHello comes.  b,
 * unrestricted and brokered, is spliced to the address it dialled once the
 * head timeout ends, and then talks both ways; a, restricted, is reset as
 * any connection without a name. */
void
broker_server_first (void)
{
  g_autoptr(GPtrArray) rules = g_ptr_array_new_with_free_func ((GDestroyNotify) box_rule_free);
  g_autoptr(GPtrArray) none = g_ptr_array_new ();
  g_autoptr(GString) got = NULL;
  g_autoptr(GError) error = NULL;
  gboolean reset;
  int fd;

  broker_set_up ();
  box_nftables_proxy_set_limits (world.plugin->proxy, 0, 300, 0);
  set_brokered (ID_B, TRUE);
  fd = open_held (world.b, INET, "443");   /* the greeting, within 2 s */
  g_assert_cmpint (held_echo (fd), ==, 0);
  close (fd);
  set_brokered (ID_B, FALSE);

  g_ptr_array_add (rules, rule_new (WANTED));
  g_assert_true (box_network_set_egress (BOX_NETWORK (world.plugin), ID_A, rules, &error));
  g_assert_no_error (error);
  set_brokered (ID_A, TRUE);
  got = exchange_bytes (world.a, INET, "443", "", 0, FALSE, &reset);
  g_assert_cmpstr (got->str, ==, "");
  g_assert_true (reset);
  set_brokered (ID_A, FALSE);
  g_assert_true (box_network_set_egress (BOX_NETWORK (world.plugin), ID_A, none, &error));
  g_assert_no_error (error);
  box_nftables_proxy_set_limits (world.plugin->proxy, 0, BOX_NFTABLES_PROXY_HEAD_TIMEOUT_MS, 0);
}
