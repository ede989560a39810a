/* boxd: the daemon's main().  It only wires configuration, the engine and
 * the transports together; everything else lives in libboxcore. */
#include "config.h"

#include <errno.h>
#include <glib-unix.h>
#include <glib/gi18n.h>
#include <locale.h>
#include <sys/prctl.h>

#include "box-acme.h"
#include "box-dbus-daemon.h"
#include "box-edge-cert.h"
#include "box-edge-certs.h"
#include "box-edge-http.h"
#include "box-edge-server.h"
#include "box-engine.h"
#include "box-error.h"
#include "box-http-server.h"
#include "box-insandbox.h"

static gboolean
on_signal (gpointer user_data)
{
  GMainLoop *loop = user_data;

  g_message (_("shutting down"));
  g_main_loop_quit (loop);
  return G_SOURCE_REMOVE;
}

static const char *
nonempty (const char *value)
{
  return value != NULL && value[0] != '\0' ? value : NULL;
}

/* The edge on cfg->edge_listen, with the operator's certificate or one of
 * boxd's own CA, own domains' certificates by server name (reloaded on
 * SIGHUP and on change), and its plain-HTTP listener when
 * cfg->edge_http_listen is set. */
static BoxEdgeServer *
start_edge (BoxEngine *engine, BoxConfig *cfg, BoxEdgeCerts **certs_out,
            BoxEdgeHttp **http_out, BoxAcme **acme_out, GError **error)
{
  g_autoptr(BoxAcme) acme = NULL;
  g_autoptr(BoxEdgeCerts) certs = NULL;
  g_autoptr(BoxEdgeServer) edge = NULL;
  g_autoptr(BoxEdgeChallenges) challenges = NULL;
  g_autoptr(BoxEdgeHttp) http = NULL;
  g_autofree char *ca = NULL;

  if (cfg->acme && nonempty (cfg->edge_http_listen) == NULL) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INVALID,
                         _("acme needs edge_http_listen (its http-01 challenges are answered there)"));
    return NULL;
  }
  certs = box_edge_certs_new (cfg->data_dir, cfg->sandbox_domain, nonempty (cfg->edge_cert),
                              nonempty (cfg->edge_key), error);
  if (certs == NULL)
    return NULL;
  box_edge_certs_watch (certs);
  edge = box_edge_server_new (engine, certs);
  if (!box_edge_server_listen (edge, cfg->edge_listen, error))
    return NULL;
  ca = box_edge_ca_path (cfg->data_dir);
  g_message (_("serving sandbox URLs on https://%s (port %u) for *.%s%s%s"), cfg->edge_listen,
             box_edge_server_get_port (edge), cfg->sandbox_domain,
             nonempty (cfg->edge_cert) == NULL ? "; CA certificate in " : "",
             nonempty (cfg->edge_cert) == NULL ? ca : "");
  if (nonempty (cfg->edge_http_listen) != NULL) {
    challenges = box_edge_challenges_new ();
    http = box_edge_http_new (challenges, box_edge_server_get_port (edge),
                              cfg->http_header_timeout_s);
    if (!box_edge_http_listen (http, cfg->edge_http_listen, error)) {
      box_edge_server_shutdown (edge);
      return NULL;
    }
    g_message (_("redirecting http://%s (port %u) to the edge's https"), cfg->edge_http_listen,
               box_edge_http_get_port (http));
  }
  if (cfg->acme) {
    acme = box_acme_new (engine, certs, challenges, error);
    if (acme == NULL) {
      box_edge_http_shutdown (http);
      box_edge_server_shutdown (edge);
      return NULL;
    }
    box_edge_server_set_acme (edge, acme);
    g_message (_("certificates for hosts under own domains from %s"), cfg->acme_directory);
  }
  *certs_out = g_steal_pointer (&certs);
  *http_out = g_steal_pointer (&http);
  *acme_out = g_steal_pointer (&acme);
  return g_steal_pointer (&edge);
}

/* SIGHUP, always handled (its default would end boxd): reloads what
 * reloads without a restart, the edge's certificates (@user_data, NULL
 * without the edge); the rest of the configuration is read at start only. */
static gboolean
on_sighup (gpointer user_data)
{
  BoxEdgeCerts *certs = user_data;

  if (certs == NULL) {
    g_message (_("SIGHUP: nothing to reload (no edge; the configuration is read at start)"));
    return G_SOURCE_CONTINUE;
  }
  g_message (_("SIGHUP: reloading the edge's certificates"));
  box_edge_certs_reload (certs);
  return G_SOURCE_CONTINUE;
}

int
main (int argc, char **argv)
{
  g_autoptr(BoxConfig) config = box_config_new ();
  g_autoptr(BoxEngine) engine = NULL;
  g_autoptr(BoxHttpServer) http = NULL;
  g_autoptr(BoxInsandbox) insandbox = NULL;
  g_autoptr(BoxEdgeServer) edge = NULL;
  g_autoptr(BoxEdgeCerts) edge_certs = NULL;
  g_autoptr(BoxEdgeHttp) edge_http = NULL;
  g_autoptr(BoxAcme) acme = NULL;
  g_autoptr(BoxDBusDaemon) dbus = NULL;
  g_autoptr(GMainLoop) loop = NULL;
  g_autoptr(GError) error = NULL;
  BoxConfig *cfg;

  setlocale (LC_ALL, "");
  bindtextdomain (GETTEXT_PACKAGE, LOCALEDIR);
  bind_textdomain_codeset (GETTEXT_PACKAGE, "UTF-8");
  textdomain (GETTEXT_PACKAGE);

  if (!box_config_parse_args (config, &argc, &argv, &error) ||
      !box_config_resolve (config, &error)) {
    g_printerr ("boxd: %s\n", error->message);
    return 2;
  }

  /* Processes boxd starts (QEMU, helpers) are reaped by boxd, also when
   * their parent went first. */
  if (prctl (PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
    g_debug ("cannot become a child subreaper: %s", g_strerror (errno));

  box_edge_server_init_tls ();
  cfg = config;
  engine = box_engine_new (g_steal_pointer (&config));
  if (!box_engine_start (engine, NULL, &error)) {
    g_printerr ("boxd: %s\n", error->message);
    return 1;
  }

  http = box_http_server_new (engine);
  if (!box_http_server_listen (http, cfg->listen, &error)) {
    g_printerr (_("boxd: cannot listen on %s: %s\n"), cfg->listen, error->message);
    box_engine_stop (engine);
    return 1;
  }
  /* processes inside the sandboxes reach their sub-API on /run/box/api.sock */
  insandbox = box_insandbox_new (engine, http);

  if (cfg->edge_listen != NULL && cfg->edge_listen[0] != '\0') {
    edge = start_edge (engine, cfg, &edge_certs, &edge_http, &acme, &error);
    if (edge == NULL) {
      g_printerr (_("boxd: cannot serve the edge on %s: %s\n"), cfg->edge_listen, error->message);
      box_insandbox_shutdown (insandbox);
      box_http_server_shutdown (http);
      box_engine_stop (engine);
      return 1;
    }
    box_engine_set_edge_port (engine, box_edge_server_get_port (edge));
  }

  if (cfg->dbus != BOX_DBUS_NONE) {
    dbus = box_dbus_daemon_new (engine);
    if (!box_dbus_daemon_start (dbus, cfg->dbus == BOX_DBUS_SESSION ? G_BUS_TYPE_SESSION
                                                                     : G_BUS_TYPE_SYSTEM,
                                NULL, &error)) {
      if (!cfg->dbus_required) {
        g_warning (_("no D-Bus admin interface: %s"), error->message);
        g_clear_error (&error);
        g_clear_object (&dbus);
      } else {
        g_printerr (_("boxd: cannot offer the D-Bus admin interface: %s\n"
                    "boxd: (use --no-dbus to run without it, or --session-bus)\n"),
                  error->message);
        box_engine_stop (engine);
        return 1;
      }
    }
  }

  g_message (_("serving the API on http://%s (port %u); data in %s"), cfg->listen,
             box_http_server_get_port (http), cfg->data_dir);
  if (cfg->admin_token_file != NULL)
    g_message (_("admin token in %s"), cfg->admin_token_file);

  loop = g_main_loop_new (NULL, FALSE);
  g_unix_signal_add (SIGTERM, on_signal, loop);
  g_unix_signal_add (SIGINT, on_signal, loop);
  g_unix_signal_add (SIGHUP, on_sighup, edge_certs);
  g_main_loop_run (loop);

  if (dbus != NULL)
    box_dbus_daemon_stop (dbus);
  if (edge_http != NULL)
    box_edge_http_shutdown (edge_http);
  if (edge != NULL)
    box_edge_server_shutdown (edge);
  /* after the edge: handshakes still waiting for a certificate see it end */
  if (acme != NULL)
    box_acme_shutdown (acme);
  box_insandbox_shutdown (insandbox);
  box_http_server_shutdown (http);
  box_engine_stop (engine);
  return 0;
}
