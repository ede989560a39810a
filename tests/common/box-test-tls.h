/* box-test-tls.h: TLS helpers shared by tests (the edge's and the nftables
 * plugin's), compiled into each test that lists tests/common/box-test-tls.c. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The first flight of a real GnuTLS client: its ClientHello record, with
 * @server_name as SNI, or none when NULL. */
GByteArray *box_test_client_hello (const char *server_name);

G_END_DECLS
