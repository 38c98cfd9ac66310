#ifndef CEPOLL_LOOP_H
#define CEPOLL_LOOP_H
/* A service thread's poll() answered from epoll (poll_epoll.c says why). */

typedef struct cepoll_loop cepoll_loop;

/* NULL if epoll or memory is unavailable (the thread then polls as before). */
cepoll_loop *cepoll_loop_new(void);
void cepoll_loop_free(cepoll_loop *loop);
/* From now on this thread's poll() on lws's pollfd array goes through `loop` (NULL: never). */
void cepoll_loop_enter(cepoll_loop *loop);
/* Watches (on != 0) or stops watching the listening socket; poll() then returns when it is
   readable and cepoll_loop_take_listener() says so once. 0, or -1 with errno. */
int cepoll_loop_listen(cepoll_loop *loop, int fd, int on);
int cepoll_loop_take_listener(cepoll_loop *loop);
/* `fd` was just accepted: any registration (or mark) under its number belonged to a closed socket. */
void cepoll_loop_forget(cepoll_loop *loop, int fd);
/* Called from poll() for a marked socket that reads ready, before poll() returns to lws. */
typedef void (*cepoll_request_hook)(void *ctx, int fd);
void cepoll_loop_set_request_hook(cepoll_loop *loop, cepoll_request_hook hook, void *ctx);
/* Marks (on != 0) or unmarks a socket as awaiting a request: the hook sees it when it is
   readable. 0, or -1 with errno (out of memory). */
int cepoll_loop_mark_request(cepoll_loop *loop, int fd, int on);
#endif
