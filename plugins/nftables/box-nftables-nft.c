/* box-nftables-nft.c: libnftables behind a mutex; see box-nftables-nft.h. */
#include "config.h"

#include <nftables/libnftables.h>

#include "box-error.h"
#include "box-nftables-nft.h"

struct _BoxNftablesNft {
  GMutex          lock;
  struct nft_ctx *ctx;
};

BoxNftablesNft *
box_nftables_nft_new (GError **error)
{
  BoxNftablesNft *nft;
  struct nft_ctx *ctx = nft_ctx_new (NFT_CTX_DEFAULT);

  if (ctx == NULL) {
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                         "nftables: cannot create a libnftables context");
    return NULL;
  }
  if (nft_ctx_buffer_output (ctx) != 0 || nft_ctx_buffer_error (ctx) != 0) {
    nft_ctx_free (ctx);
    g_set_error_literal (error, BOX_ERROR, BOX_ERROR_INTERNAL,
                         "nftables: cannot buffer libnftables output");
    return NULL;
  }
  nft = g_new0 (BoxNftablesNft, 1);
  g_mutex_init (&nft->lock);
  nft->ctx = ctx;
  return nft;
}

void
box_nftables_nft_free (BoxNftablesNft *nft)
{
  if (nft == NULL)
    return;
  nft_ctx_free (nft->ctx);
  g_mutex_clear (&nft->lock);
  g_free (nft);
}

static char *
run_locked (BoxNftablesNft *nft, const char *commands, GError **error)
{
  int rc;

  rc = nft_run_cmd_from_buffer (nft->ctx, commands);
  if (rc != 0) {
    const char *err = nft_ctx_get_error_buffer (nft->ctx);
    g_autofree char *msg = g_strstrip (g_strdup (err != NULL && err[0] != '\0'
                                                 ? err : "unknown error"));

    g_set_error (error, BOX_ERROR, BOX_ERROR_INTERNAL, "nftables: %s", msg);
    /* drain the output buffer too */
    nft_ctx_get_output_buffer (nft->ctx);
    return NULL;
  }
  nft_ctx_get_error_buffer (nft->ctx);   /* warnings, dropped */
  return g_strdup (nft_ctx_get_output_buffer (nft->ctx));
}

gboolean
box_nftables_nft_run (BoxNftablesNft *nft, const char *commands, GError **error)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&nft->lock);
  g_autofree char *output = run_locked (nft, commands, error);

  return output != NULL;
}

char *
box_nftables_nft_list (BoxNftablesNft *nft, const char *command, GError **error)
{
  g_autoptr(GMutexLocker) locker = g_mutex_locker_new (&nft->lock);

  return run_locked (nft, command, error);
}
