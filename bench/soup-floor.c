/* soup-floor.c: the trivial libsoup 3 server that is api-bench's floor.
 *
 *   soup-floor PORT [close]
 *
 * Listens on 127.0.0.1:PORT and answers every request with a small JSON
 * body, the size of a short API answer.  With "close", every answer
 * carries "Connection: close" (what boxd did before it kept connections
 * alive).  Prints "ready" on stdout once it listens.  Built by
 * bench/api-bench with the system's cc and pkg-config; not installed.
 */
#include <libsoup/soup.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char body[] =
  "{\"id\":\"sb_0123456789abcdef\",\"name\":\"floor\",\"state\":\"running\"}";

static void
handler (SoupServer *server, SoupServerMessage *msg, const char *path,
         GHashTable *query, gpointer user_data)
{
  gboolean close_each = GPOINTER_TO_INT (user_data);

  soup_server_message_set_status (msg, SOUP_STATUS_OK, NULL);
  soup_server_message_set_response (msg, "application/json", SOUP_MEMORY_STATIC,
                                    body, strlen (body));
  if (close_each)
    soup_message_headers_replace (soup_server_message_get_response_headers (msg),
                                  "Connection", "close");
}

int
main (int argc, char **argv)
{
  g_autoptr(SoupServer) server = NULL;
  g_autoptr(GMainLoop) loop = NULL;
  g_autoptr(GError) error = NULL;
  g_autoptr(GInetAddress) address = NULL;
  g_autoptr(GSocketAddress) socket_address = NULL;
  gboolean close_each;

  if (argc < 2) {
    fprintf (stderr, "usage: soup-floor PORT [close]\n");
    return 2;
  }
  close_each = argc > 2 && strcmp (argv[2], "close") == 0;
  server = soup_server_new ("server-header", "soup-floor ", NULL);
  soup_server_add_handler (server, NULL, handler, GINT_TO_POINTER (close_each), NULL);
  address = g_inet_address_new_loopback (G_SOCKET_FAMILY_IPV4);
  socket_address = g_inet_socket_address_new (address, (guint16) atoi (argv[1]));
  if (!soup_server_listen (server, socket_address, 0, &error)) {
    fprintf (stderr, "soup-floor: %s\n", error->message);
    return 1;
  }
  printf ("ready\n");
  fflush (stdout);
  loop = g_main_loop_new (NULL, FALSE);
  g_main_loop_run (loop);
  return 0;
}
