from a3s_sandbox_client import Client

with Client(workspace=".") as sb:  # starts `a3s-sandbox serve`
    r = sb.exec(["sh", "-c", "echo hello; echo oops >&2; exit 3"],
                on_output=lambda stream, data: print(stream, data))
    print(r["exit_code"], repr(r["stdout"]), r["policy"])
