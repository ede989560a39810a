/* box-agent-private.h: between BoxAgentClient and BoxAgentChannel.  Not installed. */
#pragma once

#include "box-agent-client.h"
#include "box-agent-frame.h"

G_BEGIN_DECLS

#define BOX_AGENT_GONE_MESSAGE "the sandbox's agent went away"

/* client -> channel */
BoxAgentChannel *box_agent_channel_new            (BoxAgentClient *client,
                                                   guint32         id,
                                                   guint32         window);
void             box_agent_channel_set_reply      (BoxAgentChannel *self,
                                                   JsonObject      *reply);
/* A frame for this channel from the agent. */
void             box_agent_channel_handle_frame   (BoxAgentChannel           *self,
                                                   const BoxAgentFrameHeader *header,
                                                   GBytes                    *payload);
/* Deliver held frames from an idle, then frames as they come. */
void             box_agent_channel_release        (BoxAgentChannel *self);
/* The connection is gone (or the client disposed): fail everything,
 * emit ::closed (once released). */
void             box_agent_channel_lost           (BoxAgentChannel *self);

/* channel -> client */
/* Queue a frame; @urgent frames (CREDIT, channel-0 requests) go before
 * queued data.  Nothing happens once the client is closed. */
void             box_agent_client_send_frame      (BoxAgentClient *client,
                                                   GBytes         *frame,
                                                   gboolean        urgent);
/* The channel is over (CLOSE from the agent): forget its id. */
void             box_agent_client_forget_channel  (BoxAgentClient  *client,
                                                   BoxAgentChannel *channel);
GMainContext    *box_agent_client_get_context     (BoxAgentClient *client);

/* A source on @context that runs @func(@cancellable, @data) once @cancellable is
 * cancelled; NULL without a cancellable.  Destroy it when done. */
GSource         *box_agent_watch_cancellable      (GMainContext            *context,
                                                   GCancellable            *cancellable,
                                                   GCancellableSourceFunc   func,
                                                   gpointer                 data);

/* agent error {code, message} -> BOX_ERROR */
GError          *box_agent_error_from_reply       (JsonObject *reply);

G_END_DECLS
