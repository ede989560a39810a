/* guest-httpd: the minimal HTTP server behind the edge in bench/edge-bench.
 *
 * One thread, epoll, non-blocking sockets, HTTP/1.1 keep-alive (HTTP/1.0
 * and "Connection: close" close after the answer), requests handled in
 * order, one at a time per connection:
 *   GET /big/N    N bytes of 'x' with a Content-Length, streamed
 *   an upgrade    101, then the raw bytes echoed until the client closes
 *   HEAD          the head of the small answer
 *   anything else a small fixed body (BODY below) with a Content-Length
 * A request body (Content-Length only; chunked is refused with 501) is
 * read and discarded.  Heads over HEAD_MAX are 431 and close.
 *
 * Built statically on the host by edge-bench (the guest is x86_64 Linux):
 *   cc -O2 -static -o guest-httpd bench/guest-httpd.c
 * Run: guest-httpd PORT [ADDRESS]   (default 0.0.0.0) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define HEAD_MAX  8192
#define MAX_FDS   8192
#define BIG_CHUNK 65536
#define BODY      "{\"ok\":true,\"server\":\"guest-httpd\",\"note\":\"a small fixed answer for edge-bench\"}\n"

enum { HTTP, ECHO };

typedef struct {
  int      fd;
  int      mode;
  int      close_after;
  size_t   in_len;
  uint64_t discard;          /* request body bytes still to skip */
  char     in[HEAD_MAX];
  char     out[16384];
  size_t   out_len, out_off;
  uint64_t big_left;         /* /big/N bytes still to send after out */
} Conn;

static Conn *conns[MAX_FDS];
static char  big[BIG_CHUNK];
static int   ep;

static void
watch (Conn *c, int out)
{
  struct epoll_event ev = { .events = out ? EPOLLOUT : EPOLLIN, .data.fd = c->fd };

  epoll_ctl (ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void
drop (Conn *c)
{
  close (c->fd);
  conns[c->fd] = NULL;
  free (c);
}

static int
has_token (const char *head, const char *name, const char *token)
{
  size_t nlen = strlen (name);

  for (const char *p = strstr (head, "\r\n"); p != NULL; p = strstr (p + 2, "\r\n")) {
    const char *line = p + 2;
    const char *end = strstr (line, "\r\n");
    if (end == NULL || end == line)
      return 0;
    if (strncasecmp (line, name, nlen) == 0 && line[nlen] == ':') {
      if (token == NULL)
        return 1;
      for (const char *v = line + nlen + 1; v + strlen (token) <= end; v++)
        if (strncasecmp (v, token, strlen (token)) == 0)
          return 1;
    }
  }
  return 0;
}

static uint64_t
header_number (const char *head, const char *name)
{
  size_t nlen = strlen (name);

  for (const char *p = strstr (head, "\r\n"); p != NULL; p = strstr (p + 2, "\r\n"))
    if (strncasecmp (p + 2, name, nlen) == 0 && p[2 + nlen] == ':')
      return strtoull (p + 3 + nlen, NULL, 10);
  return 0;
}

static void
answer (Conn *c, int status, const char *extra, const char *body, uint64_t length)
{
  c->out_len = (size_t) snprintf (c->out, sizeof c->out,
                                  "HTTP/1.1 %d %s\r\nContent-Length: %llu\r\n%s%s\r\n%s", status,
                                  status == 200 ? "OK" : status == 431 ? "Too Large" : "Error",
                                  (unsigned long long) length, extra,
                                  c->close_after ? "Connection: close\r\n" : "", body);
  c->out_off = 0;
}

/* One whole head is in c->in (@len bytes with its blank line). */
static void
handle (Conn *c, size_t len)
{
  char method[16] = "", path[256] = "", version[16] = "";
  char saved = c->in[len];

  c->in[len] = '\0';
  sscanf (c->in, "%15s %255s %15s", method, path, version);
  c->close_after = strcmp (version, "HTTP/1.1") != 0 || has_token (c->in, "Connection", "close");
  c->discard = header_number (c->in, "Content-Length");
  if (has_token (c->in, "Upgrade", NULL) && has_token (c->in, "Connection", "upgrade")) {
    c->out_len = (size_t) snprintf (c->out, sizeof c->out, "HTTP/1.1 101 Switching Protocols\r\n"
                                    "Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
    c->out_off = 0;
    c->mode = ECHO;
    c->discard = 0;
  } else if (has_token (c->in, "Transfer-Encoding", NULL)) {
    c->close_after = 1;
    answer (c, 501, "", "", 0);
  } else if (strncmp (path, "/big/", 5) == 0 && strcmp (method, "GET") == 0) {
    c->big_left = strtoull (path + 5, NULL, 10);
    answer (c, 200, "Content-Type: application/octet-stream\r\n", "", c->big_left);
  } else {
    answer (c, 200, "Content-Type: application/json\r\n", strcmp (method, "HEAD") == 0 ? "" : BODY,
            sizeof BODY - 1);
  }
  c->in[len] = saved;
  memmove (c->in, c->in + len, c->in_len - len);
  c->in_len -= len;
}

/* Sends what is waiting: 1 when all went, 0 when the socket is full, -1 on an error. */
static int
flush (Conn *c)
{
  while (c->out_off < c->out_len || c->big_left > 0) {
    const char *p = c->out + c->out_off;
    size_t n = c->out_len - c->out_off;
    ssize_t w;

    if (n == 0) {
      p = big;
      n = c->big_left < BIG_CHUNK ? (size_t) c->big_left : BIG_CHUNK;
    }
    w = send (c->fd, p, n, MSG_NOSIGNAL);
    if (w < 0)
      return errno == EAGAIN ? 0 : -1;
    if (c->out_off < c->out_len)
      c->out_off += (size_t) w;
    else
      c->big_left -= (uint64_t) w;
  }
  c->out_len = c->out_off = 0;
  return 1;
}

/* Works through what was read: returns -1 to close the connection. */
static int
progress (Conn *c)
{
  for (;;) {
    int f = flush (c);
    char *end;

    if (f < 0)
      return -1;
    if (f == 0) {
      watch (c, 1);
      return 0;
    }
    if (c->mode == ECHO) {
      if (c->in_len > 0) {
        memcpy (c->out, c->in, c->in_len < sizeof c->out ? c->in_len : sizeof c->out);
        c->out_len = c->in_len < sizeof c->out ? c->in_len : sizeof c->out;
        memmove (c->in, c->in + c->out_len, c->in_len - c->out_len);
        c->in_len -= c->out_len;
        continue;
      }
      break;
    }
    if (c->close_after)
      return -1;
    if (c->discard > 0) {
      size_t n = c->discard < c->in_len ? (size_t) c->discard : c->in_len;
      memmove (c->in, c->in + n, c->in_len - n);
      c->in_len -= n;
      c->discard -= n;
      if (c->discard > 0)
        break;
    }
    end = memmem (c->in, c->in_len, "\r\n\r\n", 4);
    if (end == NULL) {
      if (c->in_len == sizeof c->in) {
        c->close_after = 1;
        c->in_len = 0;
        answer (c, 431, "", "", 0);
        continue;
      }
      break;
    }
    handle (c, (size_t) (end + 4 - c->in));
  }
  watch (c, 0);
  return 0;
}

static void
readable (Conn *c)
{
  ssize_t n = recv (c->fd, c->in + c->in_len, sizeof c->in - c->in_len, 0);

  if (n == 0 || (n < 0 && errno != EAGAIN) || (n > 0 && (c->in_len += (size_t) n, progress (c) < 0)))
    drop (c);
}

int
main (int argc, char **argv)
{
  struct sockaddr_in addr = { .sin_family = AF_INET };
  struct epoll_event ev = { .events = EPOLLIN };
  int one = 1, lfd;

  if (argc < 2) {
    fprintf (stderr, "usage: guest-httpd PORT [ADDRESS]\n");
    return 2;
  }
  signal (SIGPIPE, SIG_IGN);
  memset (big, 'x', sizeof big);
  addr.sin_port = htons ((uint16_t) atoi (argv[1]));
  if (inet_pton (AF_INET, argc > 2 ? argv[2] : "0.0.0.0", &addr.sin_addr) != 1) {
    fprintf (stderr, "guest-httpd: bad address\n");
    return 2;
  }
  lfd = socket (AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  setsockopt (lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (lfd < 0 || bind (lfd, (struct sockaddr *) &addr, sizeof addr) < 0 || listen (lfd, 1024) < 0) {
    perror ("guest-httpd");
    return 1;
  }
  ep = epoll_create1 (0);
  ev.data.fd = lfd;
  epoll_ctl (ep, EPOLL_CTL_ADD, lfd, &ev);
  for (;;) {
    struct epoll_event evs[64];
    int n = epoll_wait (ep, evs, 64, -1);

    for (int i = 0; i < n; i++) {
      int fd = evs[i].data.fd;

      if (fd == lfd) {
        int cfd;
        while ((cfd = accept4 (lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
          Conn *c;
          if (cfd >= MAX_FDS || (c = calloc (1, sizeof *c)) == NULL) {
            close (cfd);
            continue;
          }
          c->fd = cfd;
          setsockopt (cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          conns[cfd] = c;
          ev.events = EPOLLIN;
          ev.data.fd = cfd;
          epoll_ctl (ep, EPOLL_CTL_ADD, cfd, &ev);
        }
      } else if (conns[fd] != NULL) {
        Conn *c = conns[fd];
        if (evs[i].events & EPOLLOUT) {
          if (progress (c) < 0)
            drop (c);
        } else if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
          readable (c);
        }
      }
    }
  }
}
