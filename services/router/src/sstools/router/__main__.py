from sstools.router.cli import main

main()
