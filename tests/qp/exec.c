/* tests/qp-leave.sh: exec from inside procedures. run_it is called 3 times (calls known
 * from the code): twice its exec fails and it returns, the third time the program is
 * replaced by echo. Before that, spawn() starts echo in a vfork child (its exec and its
 * _exit must not count for the parent, which shares its memory). */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
static __attribute__((noipa)) int work(int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += i;
    return s;
}
static __attribute__((noipa)) void spawn(const char *prog)
{
    pid_t pid = vfork();
    if (pid == 0) {
        execl(prog, prog, "from-a-vfork-child", (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    printf("child: %d\n", WEXITSTATUS(st));
}
static __attribute__((noipa)) void run_it(const char *prog)
{
    printf("work %d\n", work(100));
    fflush(stdout);
    execl(prog, prog, "hello-from-exec", (char *)NULL);
    printf("exec of %s failed\n", prog);
}
int main(void)
{
    spawn("/bin/echo");
    spawn("/nonexistent/prog");
    run_it("/nonexistent/prog");
    run_it("/nonexistent/other");
    run_it("/bin/echo");
    return 0;
}
